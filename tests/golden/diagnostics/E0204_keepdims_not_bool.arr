def f(x: f32[2, 3]) -> f32[1, 1]:
    return sum(x, keepdims=1)
