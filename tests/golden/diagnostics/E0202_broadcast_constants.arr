def f(x: f32[3], y: f32[4]) -> f32[3]:
    return x * y
