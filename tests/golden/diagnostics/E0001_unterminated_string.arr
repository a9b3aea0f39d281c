def f(x: f32) -> f32:
    assert x > 0, "positive
    return x
