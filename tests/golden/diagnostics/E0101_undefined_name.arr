def f(x: f32[n]) -> f32[n]:
    total = x + 1
    return totl
