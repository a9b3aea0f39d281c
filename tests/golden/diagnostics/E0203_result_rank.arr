def f(x: f32[n]) -> f32:
    return x
