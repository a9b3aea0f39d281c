def f(x: f32[n], k: i32) -> f32[n]:
    for i in range(k):
        x = x.astype(f64)
    return x.astype(f32)
