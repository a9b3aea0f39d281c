def half(x: f32[n]) -> f32[n]:
    return x >> 1
