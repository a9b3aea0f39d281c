# arrc: warnings=error
def f(x: u64[n], y: i64[n]) -> f64[n]:
    return x + y
