def f(x: f32) -> f32:
    def = 1.0
    return def
