# arrc: lower f f32[3]
def f(x: f32[n]) -> f32[n]:
    if n > 2:
        z = x
    else:
        y = x * 2.0
    return y
