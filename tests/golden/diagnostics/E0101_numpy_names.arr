def a(m: f32[n, n]) -> f32[n]:
    return eig(m)

def b(m: f32[n, n]) -> f32[n, n]:
    return expm(m)

def c(m: f32[n, n]) -> i32:
    return matrix_rank(m)

def d(x: f32[n], k: f32[3]) -> f32[n]:
    return convolve(x, k)

def e(x: f32[n]) -> f32[n]:
    return scan(x)

def g(x: f32[n]) -> f32:
    return amax(x)

def h(x: f32[n]) -> f32:
    return summ(x)
