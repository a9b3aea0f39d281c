# cafÃ© is fine, the next byte is not
def f(x: f32) -> f32:
    return x ÿ 1
