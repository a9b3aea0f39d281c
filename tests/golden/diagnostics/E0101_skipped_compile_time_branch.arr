# arrc: lower f f32[2]
def f(x: f32[n]) -> f32[n]:
    if n > 2:
        y = x * 2.0
    return y
