def f(x: f32[n]) -> f32[n]:
    n = 3
    return x
