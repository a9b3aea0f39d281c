def f(x: f32[n], i: i32, j: i32) -> f32[2]:
    return x[i:j]
