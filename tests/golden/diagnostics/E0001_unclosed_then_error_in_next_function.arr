def f(x: f32[n]) -> f32:
    return sum(x
def g(x: f32[n]) -> f32:
    return x +
