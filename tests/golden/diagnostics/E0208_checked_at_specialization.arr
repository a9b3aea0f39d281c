# arrc: lower f f32[2]
def f(x: f32[n]) -> f32:
    return x[3]
