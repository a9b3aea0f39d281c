# Statistics of f64 data: f64 is always honoured (no global x64 flag, no silent truncation).

const DDOF: i32 = 1

def mean_var(x: f64[n]) -> (f64, f64):
    mu = sum(x) / n
    d = x - mu
    return mu, sum(d * d) / (n - DDOF)

def zscores(x: f64[n]) -> f64[n]:
    mu, v = mean_var(x)
    return (x - mu) / sqrt(v)

def column_stats(x: f64[r, c]) -> (f64[c], f64[c], f64[c]):
    return mean(x, axis=0), std(x, axis=0), max(x, axis=0) - min(x, axis=0)

def main() -> (f64, f64, f64[5], f64[2], f64[2], f64[2]):
    # 1e8 plus quarter steps: in f32 the quarters would be rounded away and the variance be 0
    x = 100000000.0 + 0.25 * arange(1, 6, dtype=f64)
    data = reshape(arange(8, dtype=f64), (4, 2)) * [1.0, 10.0]
    m, v = mean_var(x)
    avg, sd, spread = column_stats(data)
    return m, v, zscores(x), avg, sd, spread
