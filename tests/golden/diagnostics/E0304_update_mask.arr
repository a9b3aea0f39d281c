def zero_tail(x: f32[n], i: i32) -> f32[n]:
    x[i:] = 0.0
    return x
