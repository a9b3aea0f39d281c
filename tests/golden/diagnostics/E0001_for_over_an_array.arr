def f(xs: f32[3, 2]) -> f32:
    s = 0.0
    for row in xs:
        s += sum(row)
    return s
