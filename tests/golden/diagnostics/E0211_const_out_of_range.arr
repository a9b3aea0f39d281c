const LIMIT: i8 = 200

def f(x: i8) -> i8:
    return x
