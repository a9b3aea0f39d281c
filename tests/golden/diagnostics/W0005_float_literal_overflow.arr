def energy(x: f32[n]) -> f32[n]:
    return x * 1e40
