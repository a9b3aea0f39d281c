def scale(a: f32[n], k: f32) -> f32[n]:
    return a * k

def f(x: f32[n]) -> f32[n]:
    return scale(x)
