def f(x: f32[n]) -> f32[n]:
    print(f"x = {x}")
    return x
