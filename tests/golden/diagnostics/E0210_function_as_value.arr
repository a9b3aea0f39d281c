def f(x: f32[n]) -> f32[n]:
    g = exp
    return x
