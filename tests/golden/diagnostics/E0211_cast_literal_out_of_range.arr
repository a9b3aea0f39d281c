def main() -> u64:
    return u64(2**64)
