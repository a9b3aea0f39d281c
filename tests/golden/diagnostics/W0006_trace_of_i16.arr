def total(m: i16[70000, 70000]) -> i32:
    return trace(m)
