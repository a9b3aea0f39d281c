def g(a: f32) -> f32:
    return a

def f(x: f32) -> f32:
    return g(x, x)
