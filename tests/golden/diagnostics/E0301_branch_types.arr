def f(x: f32[n], c: bool) -> f32[n]:
    if c:
        y = x
    else:
        y = x.astype(i32)
    return y * 2
