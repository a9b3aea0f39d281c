def widen(x: i32[n]) -> f32[n]:
    return x.astype(float)
