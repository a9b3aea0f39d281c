def f(x: f32[n]) -> f32[n]:
    y: f32[n] = x + 1.0
    return y
