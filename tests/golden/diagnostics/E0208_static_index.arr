def f(x: f32[3]) -> f32:
    return x[5]
