def count(x: i32[n]) -> i32:
    c = 0
    for i in range(n): if x[i] > 0: c += 1
    return c
