def f(x: f31[n]) -> f32:
    return sum(x)
