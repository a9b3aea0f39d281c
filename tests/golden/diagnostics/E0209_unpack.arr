def pair(a: f32) -> (f32, f32):
    return a, -a

def f(x: f32) -> f32:
    a, b, c = pair(x)
    return a
