def sign(k: i32) -> i32:
    if k > 0:
        s = 1
    else if k < 0:
        s = -1
    else:
        s = 0
    return s
