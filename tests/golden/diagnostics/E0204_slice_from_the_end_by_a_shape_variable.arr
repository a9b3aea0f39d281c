def last(x: f32[n + k]) -> f32[k]:
    return x[-k:]
