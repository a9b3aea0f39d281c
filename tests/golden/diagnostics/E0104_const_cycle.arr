const a: i32 = b
const b: i32 = a

def main() -> i32:
    return a
