# Fitting a model by gradient descent (LANGUAGE.md section 15): `grad(loss)` is the derivative of the
# loss with respect to the weights, taken by reverse mode over arr's own StableHLO; the data are drawn
# with explicit keys (section 12). The training loop has a run-time trip count.

const TRUE_W: f64[3] = [1.5, -2.0, 0.5]

def loss(w: f64[3], x: f64[n, 3], y: f64[n]) -> f64:
    return mean((x @ w - y) ** 2)

def fit(x: f64[n, 3], y: f64[n], steps: i32, rate: f64) -> f64[3]:
    w = zeros((3,), dtype=f64)
    for t in range(steps):
        w = w - rate * grad(loss)(w, x, y)
    return w

def main() -> (f64[3], f64, f64):
    k_x, k_noise = split(key(7))
    x = normal(k_x, (256, 3), dtype=f64)
    y = x @ TRUE_W + 0.01 * normal(k_noise, (256,), dtype=f64)
    w = fit(x, y, 200, 0.1)
    return w, loss(zeros((3,), dtype=f64), x, y), loss(w, x, y)
