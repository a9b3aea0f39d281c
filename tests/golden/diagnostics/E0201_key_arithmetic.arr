def f(k: key) -> key:
    return k + 1
