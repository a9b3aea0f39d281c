def f(x: f32[3]) -> f32[3]:
    return x.at[0].set(1.0)
