import numpy as np, arrc, jax, jax.numpy as jnp
def show(what, v): print("probe:", what, ":", v, flush=True)
try:
    mod = arrc.loads("""
def q(x: f32[n]) -> (f32, f32[3]):
    return median(x), quantile(x, [0.1, 0.5, 0.9])
def r(x: f32[2, 3]) -> (f32[12], f32[3, 2], f32[3, 2])
    return repeat(x, 2), swapaxes(x, 0, 1), moveaxis(x, 0, -1)
def b(x: i32) -> bf16:
    return bf16(x) + bf16(i32(16842753))
""".replace("f32[3, 2])\n", "f32[3, 2]):\n"), device="tpu")
    x = np.random.default_rng(0).standard_normal(9).astype(np.float32)
    got = mod.q(x)
    show("quantile", [np.allclose(got[0], jnp.median(x)), np.allclose(got[1], jnp.quantile(x, jnp.array([0.1, 0.5, 0.9])))])
    y = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = mod.r(y)
    show("repeat/swap/move", [np.array_equal(got[0], np.repeat(y, 2)), np.array_equal(got[1], y.T), np.array_equal(got[2], np.moveaxis(y, 0, -1))])
    show("bf16 cast", [float(mod.b(np.int32(16842753))), float(jnp.asarray(16842753, jnp.int32).astype(jnp.bfloat16) * 2)])
    g = arrc.loads("def m(x: f32[n]) -> f32:\n    return median(x)\n", device="tpu")
    show("grad median", np.allclose(arrc.grad(g.m)(x), jax.grad(jnp.median)(x)))
    c = g.m.lower(x).compile()
    show("compiled", float(c(x)) == float(g.m(x)))
except Exception as e:
    import traceback; traceback.print_exc()
