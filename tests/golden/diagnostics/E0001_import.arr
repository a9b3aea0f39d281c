import jax.numpy as jnp

def f(x: f32[n]) -> f32:
    return sum(x)
