def f(x: f32[n]) -> f32:
    return sum(x, axis=1)
