def f(x: f32[n]) -> f32[n]:
    y = x * 2
