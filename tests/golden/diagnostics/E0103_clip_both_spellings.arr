def f(x: f32[n]) -> f32[n]:
    return clip(x, min=0.0, a_min=0.5, max=1.0)
