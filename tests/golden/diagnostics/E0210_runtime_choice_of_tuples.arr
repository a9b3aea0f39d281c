def f(x: f32[n], c: bool) -> f32[n]:
    a = x
    b = x * 2.0
    u, v = (a, b) if c else (b, a)
    return u - v
