def f(x: f64, y: f64) -> f64:
    return x * y

def g(x: f64) -> f64:
    return grad(f, argnums=2)(x, x)
