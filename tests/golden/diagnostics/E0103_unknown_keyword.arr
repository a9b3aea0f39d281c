def f(x: f32[n, m]) -> f32[m]:
    return sum(x, axes=0)
