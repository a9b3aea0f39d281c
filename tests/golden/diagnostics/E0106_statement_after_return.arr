def f(x: f32) -> f32:
    return x
    y = x + 1
