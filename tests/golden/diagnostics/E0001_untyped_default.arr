def f(x: f32[n], eps=1e-6) -> f32[n]:
    return x + eps
