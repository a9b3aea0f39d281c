def f(x: f32[n]) -> f32[n]:
    return x if x > 0 else -x
