def main(n: i32) -> f32:
    t = "x"
    for i in range(n):
        t = "y"
    print("t is", t)
    return 1.0
