def even(x: f32) -> f32:
    return odd(x)

def odd(x: f32) -> f32:
    return even(x)
