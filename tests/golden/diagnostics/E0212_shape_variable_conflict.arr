def g(a: f32[n], b: f32[n]) -> f32[n]:
    return a + b

def f(x: f32[3], y: f32[4]) -> f32[3]:
    return g(x, y)
