def f(x: f32[n]) -> f32[n]:
    if x > 0:
        x = -x
    return x
