def f(x: u8[4]) -> u8[4]:
    x[0] = 300
    return x
