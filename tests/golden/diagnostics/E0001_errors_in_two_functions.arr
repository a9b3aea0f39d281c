def f(x: f32[n]) -> f32[n]:
    y = x *
    return y

def fine(x: f32) -> f32:
    return x

def g(x: f32[n]) -> f32:
    return sum(x]
