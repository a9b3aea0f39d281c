def f(x: i32[n]) -> i32[n]:
    x /= 2
    return x
