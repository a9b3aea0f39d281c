def f(ks: key[4]) -> f32[3]:
    return uniform(ks, (3,))
