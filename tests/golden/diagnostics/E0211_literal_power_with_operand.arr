def f(x: i32) -> i32:
    return x + 2 ** 40
