def first_positive(x: f32[n]) -> f32:
    for i in range(n):
        if x[i] > 0.0:
            return x[i]
    return 0.0
