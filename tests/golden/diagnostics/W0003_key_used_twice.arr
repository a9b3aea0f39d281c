def f(k: key) -> f32[3]:
    a = uniform(k, (3,))
    return a + normal(k, (3,))
