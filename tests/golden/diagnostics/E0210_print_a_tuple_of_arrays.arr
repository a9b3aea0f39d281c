def f(x: f32[n, 2]) -> f32:
    print((x[0, 0], n))
    return x[0, 0]
