def f(x: u8[n]) -> u8[n]:
    return x + 300
