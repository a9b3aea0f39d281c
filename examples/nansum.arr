# NaN-aware reductions without boolean-mask indexing: the shape never depends on the data.
# (JAX's x[~isnan(x)] fails under jit; `where` keeps the shape static.)

def nansum(x: f32[n]) -> f32:
    mask = ~isnan(x)
    return sum(where(mask, x, 0))

def nanmean(x: f32[n]) -> f32:
    valid = ~isnan(x)
    count = sum(where(valid, 1.0, 0.0))
    return nansum(x) / count

def nanmax(x: f32[b, k]) -> f32[b]:
    return max(where(isnan(x), -inf, x), axis=1)

def main() -> (f32, f32, f32[2]):
    x = [1.0, 2.0, nan, 3.0, 4.0]
    rows = [[1.0, nan, 5.0], [nan, -2.0, -7.0]]
    return nansum(x), nanmean(x), nanmax(rows)
