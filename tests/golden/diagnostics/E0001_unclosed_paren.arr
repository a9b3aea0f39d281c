def total(x: f32[n]) -> f32:
    s = sum(x * 2.0
    return s
