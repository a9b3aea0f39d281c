def f(x: f32[n]) -> f32[n]:
    return x.clip()
