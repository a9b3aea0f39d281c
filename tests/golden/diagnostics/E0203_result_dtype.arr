def f(x: f32[n]) -> f64[n]:
    return x * 2
