def f(x: bool[n]) -> bool[n]:
    return -x
