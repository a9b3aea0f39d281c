def brightness(img: u8[5000, 4000]) -> u32:
    return sum(img)
