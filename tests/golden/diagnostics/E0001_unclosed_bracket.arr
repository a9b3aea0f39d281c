def pair() -> f32[2]:
    v = [1.0, 2.0
    return v
