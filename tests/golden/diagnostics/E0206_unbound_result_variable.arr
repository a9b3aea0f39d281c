def f(x: f32[n]) -> f32[m]:
    return x
