# arrc: lower g f32
def f(x: f32) -> f32:
    for i in range(3):
        x = x * x
    return x

def g(x: f32) -> f32:
    return grad(f)(x)
