def f(x: i64[n], y: f32[n]) -> f32[n]:
    return x + y
