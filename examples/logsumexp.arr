# Numerically stable log-sum-exp and softmax: subtract the maximum before `exp`.
# The naive version overflows to inf for large inputs; the stable one does not.
# guards: nan,bounds,div0
# (the naive version overflowing to inf is the point of this example; the inf guard would report it)

def naive_logsumexp(x: f32[n]) -> f32:
    return log(sum(exp(x)))

def stable_logsumexp(x: f32[n]) -> f32:
    m = max(x)
    return m + log(sum(exp(x - m)))

def softmax_rows(x: f32[b, k]) -> f32[b, k]:
    m = max(x, axis=1, keepdims=true)
    e = exp(x - m)
    return e / sum(e, axis=1, keepdims=true)

def main() -> (f32, f32, f32, f32[2, 3]):
    x = [1000.0, 1000.5, 999.0]
    logits = [[1.0, 2.0, 3.0], [1000.0, 1000.0, 1000.0]]
    return naive_logsumexp(x), stable_logsumexp(x), logsumexp(x), softmax_rows(logits)
