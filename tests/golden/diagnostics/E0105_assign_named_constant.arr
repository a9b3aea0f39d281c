def f(x: f32) -> f32:
    nan = 1.0
    return x + nan
