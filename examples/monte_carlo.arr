# Random numbers with explicit keys (LANGUAGE.md section 12), bit for bit as jax.random gives them: a
# Monte Carlo estimate of pi from f64 draws (JAX needs a global flag for those), and a random walk whose
# steps come from `fold_in(k, t)` inside a loop with a run-time trip count.

const N: i32 = 100000

def estimate_pi(k: key) -> f64:
    kx, ky = split(k)
    x = uniform(kx, (N,), dtype=f64)
    y = uniform(ky, (N,), dtype=f64, minval=-1.0, maxval=1.0)
    inside = (x * x + y * y <= 1.0).astype(f64)
    return 4.0 * mean(inside)

def walk(k: key, steps: i32) -> f32:
    position = 0.0
    for t in range(steps):
        step = uniform(fold_in(k, t), (), minval=-1.0, maxval=1.0)
        position = position + step
    return position

def main() -> (f64, f32, u32[2]):
    k = key(2026)
    k_pi, k_walk = split(k)
    return estimate_pi(k_pi), walk(k_walk, 1000), key_data(k_walk)
