def f(k: key) -> f32:
    return uniform(k, [])
