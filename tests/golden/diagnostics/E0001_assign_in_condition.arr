def f(k: i32) -> i32:
    if k = 0:
        k = 1
    return k
