def absolute(x: f32[n]) -> f32[n]:
    if x > 0.0:
        return x
    else:
        return -x
