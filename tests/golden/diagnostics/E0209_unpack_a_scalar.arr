def first(x: f32[3]) -> f32:
    (a,) = x[0]
    return a
