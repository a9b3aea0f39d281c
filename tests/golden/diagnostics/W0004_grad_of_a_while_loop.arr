# arrc: lower g f32
def f(x: f32) -> f32:
    while x < 10.0:
        x = x * x + 1.0
    return x

def g(x: f32) -> f32:
    return grad(f)(x)
