def f(k: key, n: i32) -> f32:
    s = 0.0
    for i in range(n):
        s = s + uniform(k)
    return s
