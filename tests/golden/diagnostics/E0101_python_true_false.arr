def flags(x: f32[n]) -> bool:
    seen = False
    ok = True
    return ok
