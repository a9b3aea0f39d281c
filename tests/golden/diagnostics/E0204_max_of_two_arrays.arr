def clamp_low(x: f32[n], floor: f32[n]) -> f32[n]:
    return max(x, floor)
