# arrc: lower g f64
def tail(lo: f64) -> f64:
    return sum(truncated_normal(key(0), lo, 1.0, (3,), f64))

def g(lo: f64) -> f64:
    return grad(tail)(lo)
