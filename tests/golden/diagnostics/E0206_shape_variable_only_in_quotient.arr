def halves(x: f32[n // 2]) -> f32:
    return sum(x)
