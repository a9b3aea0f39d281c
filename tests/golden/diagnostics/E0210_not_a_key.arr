def f(x: u32[2]) -> f32[3]:
    return normal(x, (3,))
