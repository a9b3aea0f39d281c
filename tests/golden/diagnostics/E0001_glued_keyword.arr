def main() -> i32:
    x = 0
    for i inrange(3):
        x = x + i
    return x
