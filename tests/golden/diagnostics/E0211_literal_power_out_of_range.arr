def f() -> i32:
    return 2 ** 40
