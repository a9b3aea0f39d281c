# Cleaning sensor rows that contain NaNs, with every shape static: `where` masks instead of
# x[~isnan(x)] (a value-dependent shape, compile error E0303), sort + a run-time index for the
# NaN-aware median, `nonzero(..., size=1)` for the first valid reading, a forward fill written as a
# loop with a run-time `if` and indexed updates, and `assert` to check the result on every call.

def nan_count(x: f32[b, t]) -> i32[b]:
    return sum(where(isnan(x), 0, 1), axis=1)

def nan_mean(x: f32[b, t]) -> f32[b]:
    valid = ~isnan(x)
    total = sum(where(valid, x, 0.0), axis=1)
    return total / maximum(sum(where(valid, 1.0, 0.0), axis=1), 1.0)

def nan_median(row: f32[t]) -> f32:
    s = sort(row)                              # NaNs sort last
    c = sum(where(isnan(row), 0, 1))
    if c == 0:
        m = nan
    else:
        m = 0.5 * (s[(c - 1) // 2] + s[c // 2])    # run-time indices
    return m

def forward_fill(row: f32[t]) -> f32[t]:
    out = row
    for i in range(1, t):
        if isnan(out[i]):
            out[i] = out[i - 1]
    return out

def clean(x: f32[b, t]) -> (f32[b, t], f32[b], i32[b]):
    medians = zeros(b)
    first = zeros(b, dtype=i32)
    filled = x
    for r in range(b):
        row = x[r, :]
        medians[r] = nan_median(row)
        first[r] = nonzero(~isnan(row), size=1, fill=-1)[0]
        filled[r, :] = forward_fill(row)
    # what forward filling cannot reach (leading NaNs) takes the row median
    filled = where(isnan(filled), expand_dims(medians, 1), filled)
    return filled, medians, first

def main() -> (f32[4, 6], f32[4], i32[4], f32[4], i32[4], f32[4, 6]):
    data = [[1.0, nan, 3.0, 4.0, nan, 6.0],
            [nan, nan, 2.0, 2.5, 100.0, 3.0],
            [7.0, 7.5, 8.0, 8.5, 9.0, 9.5],
            [nan, 1.0, nan, nan, -1.0, nan]]
    filled, medians, first = clean(data)
    assert ~isnan(filled), "every NaN is filled"
    smooth = cumsum(filled, axis=1) / arange(1, 7, dtype=f32)
    return filled, medians, first, nan_mean(data), nan_count(data), smooth
