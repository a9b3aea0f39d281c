def f(x: f32, x: f32) -> f32:
    return x
