# Mapping a function over a batch (LANGUAGE.md section 16): `vmap(f)` calls f once per lane. The
# per-example loss and its gradient (`grad` inside the mapped function) are batched by rules, as
# jax.vmap batches them: the batch of dot products is one matrix product. `clipped` takes a branch per
# lane, so it runs lane by lane, exactly as one call per example would.

def loss(w: f64[3], x: f64[3], y: f64) -> f64:
    return (dot(w, x) - y) ** 2

def per_example_grad(w: f64[3], x: f64[3], y: f64) -> f64[3]:
    return grad(loss)(w, x, y)

def clipped(g: f64[3]) -> f64[3]:
    n = sqrt(sum(g * g))
    c = g
    if n > 1.0:
        c = g / n
    return c

def main() -> (f64[8], f64[3], f64[3]):
    kx, kn = split(key(5))
    x = normal(kx, (8, 3), dtype=f64)
    w_true = [0.5, -1.0, 2.0]
    y = x @ w_true + 0.1 * normal(kn, (8,), dtype=f64)
    w = zeros((3,), dtype=f64)
    losses = vmap(loss, in_axes=(None, 0, 0))(w, x, y)
    grads = vmap(per_example_grad, in_axes=(None, 0, 0))(w, x, y)
    private = mean(vmap(clipped)(grads), axis=0)        # each example's gradient clipped to norm 1
    return losses, mean(grads, axis=0), private
