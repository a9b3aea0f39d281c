def f(x: f32[3]) -> i32[3]:
    return argsort(x, axis=true)

def g(x: f32[3]) -> f32:
    return var(x, ddof=true)
