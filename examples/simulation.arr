# Time-stepping simulations in f64 (no global flag needed): a bouncing ball, where a run-time `if`
# inside the time loop handles the bounce, and heat diffusion on a rod, where slices and an indexed
# update build the discrete Laplacian each step. Loops lower to stablehlo.while; `print` and `assert`
# run on the device's schedule, at run time, on every call.

const STEPS: i32 = 500
const G: f64 = 9.81

def bounce(h0: f64, v0: f64, steps: i32, dt: f64, restitution: f64) -> (f64, f64, i32):
    h = h0
    v = v0
    bounces = 0
    for t in range(steps):
        v = v - G * dt
        h = h + v * dt
        if h < 0.0:
            h = -h
            v = -restitution * v
            bounces += 1
    return h, v, bounces

def heat(u0: f64[n], alpha: f64, steps: i32) -> f64[n]:
    # explicit Euler, the two ends held at their initial temperature
    u = u0
    for t in range(steps):
        lap = zeros(n, dtype=f64)
        lap[1:n - 1] = u[:n - 2] - 2.0 * u[1:n - 1] + u[2:]
        u = u + alpha * lap
    return u

def steps_until_cool(u0: f64[n], alpha: f64, threshold: f64) -> i32:
    # a `while` with a data-dependent trip count
    u = u0
    steps = 0
    while max(u) > threshold:
        lap = zeros(n, dtype=f64)
        lap[1:n - 1] = u[:n - 2] - 2.0 * u[1:n - 1] + u[2:]
        u = u + alpha * lap
        steps += 1
    return steps

def main() -> (f64, f64, i32, f64[9], i32, i32):
    h, v, count = bounce(10.0, 0.0, STEPS, 0.01, 0.8)
    print("ball: height", h, "velocity", v, "after", count, "bounces")
    rod = zeros(9, dtype=f64)
    rod[4] = 100.0
    u = heat(rod, 0.25, 40)
    assert u >= 0.0, "an explicit heat step with alpha <= 0.5 keeps temperatures non-negative"
    hottest = argmax(u)
    print("rod: hottest point", hottest, "at", u[hottest])
    return h, v, count, u, hottest, steps_until_cool(rod, 0.25, 10.0)
