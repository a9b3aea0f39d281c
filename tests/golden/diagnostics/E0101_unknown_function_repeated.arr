def shifted(x: f32[n]) -> f32[n]:
    y = x
    for k in range(3):
        y = y + rol(x, 1) + rol(x, 2) + rol(x, 3)
    y = y + rol(x, 4) + rol(x, 5) + rol(x, 6)
    y = y + rol(x, 7) + rol(x, 8) + rol(x, 9) + rol(x, 10)
    return y
