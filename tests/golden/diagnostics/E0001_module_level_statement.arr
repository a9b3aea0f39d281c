x = 1

def f(y: f32) -> f32:
    return y
