def g(v: f32) -> f32:
    print("g", v)
    return v

def bad(c: bool, x: f32[3]) -> f32[3]:
    return g(1.0) if c else x

