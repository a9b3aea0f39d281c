# arrc: lower g f32 i32
def f(x: f32, n: i32) -> f32:
    for i in range(n):
        x = x * x
    return x

def g(x: f32, n: i32) -> f32:
    return grad(f)(x, n)
