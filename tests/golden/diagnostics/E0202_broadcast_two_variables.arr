def f(x: f32[n], y: f32[m]) -> f32[n]:
    return x + y
