def f(x: f32) -> f32:
        y = x
    return y
