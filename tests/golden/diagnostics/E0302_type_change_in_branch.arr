def f(k: i32, c: bool) -> i32:
    for i in range(3):
        if c:
            k = 1.5
    return k
