def f(x: f32[1, 5, 5, 2], w: f32[3, 3, 2, 4]) -> f32[1, 3, 3, 4]:
    return conv(x, w, dimension_numbers=("NHWC", "HWIO", "NHWC"))
