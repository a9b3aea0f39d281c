def scale(x: f32[n], k: f32):
    return x * k
