def f(x: f32[n]) -> f32[n]:
    square = lambda v: v * v
    return square(x)
