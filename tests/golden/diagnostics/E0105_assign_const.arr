const K: i32 = 3

def f(x: f32) -> f32:
    K = 4
    return x
