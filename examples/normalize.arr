# Row normalization with keepdims broadcasting, and a tiny dense layer on top.
# Every shape is checked symbolically when the functions are defined: b, k and h are shape variables.

const EPS: f32 = 1e-5

def standardize(x: f32[b, k]) -> f32[b, k]:
    mu = mean(x, axis=1, keepdims=true)
    var = mean((x - mu) * (x - mu), axis=1, keepdims=true)
    return (x - mu) * rsqrt(var + EPS)

def dense(x: f32[b, k], w: f32[k, h], bias: f32[h]) -> f32[b, h]:
    return relu(x @ w + bias)

def l2_normalize(x: f32[b, h]) -> f32[b, h]:
    norm = sqrt(sum(x * x, axis=1, keepdims=true))
    return x / maximum(norm, EPS)

def main() -> (f32[2, 4], f32[2], f32[2, 3]):
    x = [[1.0, 2.0, 3.0, 4.0], [10.0, 10.0, 10.0, 50.0]]
    w = [[0.5, -1.0, 0.0], [0.25, 0.5, 1.0], [-0.5, 0.5, 1.0], [1.0, 0.0, -1.0]]
    z = standardize(x)
    y = l2_normalize(dense(z, w, [0.1, 0.0, -0.1]))
    return z, sum(y * y, axis=1), y
