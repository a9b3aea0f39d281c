def mask() -> u32:
    return 0xFFFF_0000 | 0x_FF__FF
