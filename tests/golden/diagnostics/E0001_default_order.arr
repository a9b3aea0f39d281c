def normalize(x: f32[n], eps: f32 = 1e-6, scale: f32) -> f32[n]:
    return scale * x / (sum(x) + eps)
