def f(n: i32, x: f32) -> f32:
    return x * 2.0

def g(x: f32) -> f32:
    return grad(f)(3, x)
