def f(k: key) -> f32[3]:
    return uniform(k, (3,), dtype=i32)
