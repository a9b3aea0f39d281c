def f(x: f32[3 - 5]) -> f32:
    return sum(x)
