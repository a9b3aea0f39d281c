# Fitting a polynomial by least squares (LANGUAGE.md section 14): the design matrix's columns are powers
# of x; `lstsq` solves it as jnp.linalg.lstsq does (LAPACK through jaxlib), and the normal equations,
# solved through a Cholesky factor with two triangular solves, give the same coefficients. The data
# are drawn with explicit keys (section 12).

const TRUE_C: f64[4] = [0.5, -1.0, 2.0, 0.25]

def design(x: f64[n]) -> f64[n, 4]:
    return stack((ones((n,), dtype=f64), x, x * x, x * x * x), axis=1)

def normal_equations(a: f64[n, 4], y: f64[n]) -> f64[4]:
    l = cholesky(a.T @ a)
    z = triangular_solve(l, a.T @ y, lower=true)
    return triangular_solve(l, z, lower=true, trans=1)

def main() -> (f64[4], f64[4], f64, i64):
    k_x, k_noise = split(key(3))
    x = uniform(k_x, (200,), dtype=f64, minval=-2.0, maxval=2.0)
    a = design(x)
    y = a @ TRUE_C + 0.05 * normal(k_noise, (200,), dtype=f64)
    c, residuals, rank, s = lstsq(a, y)
    return c, normal_equations(a, y), norm(c - TRUE_C), rank
