def g(a: f32[n]) -> f32[n]:
    return a

def f(x: i32[n]) -> f32[n]:
    return g(x)
