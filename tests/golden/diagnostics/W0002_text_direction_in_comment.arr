def clamp(x: f32) -> f32:
    # limit‮ to one
    return minimum(x, 1.0)
