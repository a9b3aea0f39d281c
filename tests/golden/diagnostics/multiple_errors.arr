def f(x: f32[n]) -> f32[n]:
    a = x + y
    b = -(x > 0)
    return a + b

def g(x: f31) -> f32:
    return x

def h(x: f32[n]) -> f32:
    return x
