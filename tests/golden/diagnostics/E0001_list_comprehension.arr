def f(x: f32[n]) -> f32[n]:
    return [v * 2.0 for v in x]
