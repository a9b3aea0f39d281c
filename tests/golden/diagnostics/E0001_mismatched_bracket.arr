def total(x: f32[n]) -> f32:
    return sum(x]
