def f(x: f32[n, m], k: i32) -> f32[m]:
    return sum(x, axis=k)
