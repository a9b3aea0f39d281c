def main(c: bool) -> f32:
    if c:
        t = "x"
    else:
        t = "y"
    print(t)
    return 1.0
