# A NaN that the guards trace to its origin: run with `arrc run examples/faults/ratio.arr --guards nan`.
# The report blames the division on line 5 (0 / 0 at index [1]), not the multiplication that
# propagates it, and names the call chain.
def f(x: f32[n], y: f32[n]) -> f32[n]:
    b = (x + y) / (x - y)
    return b * 2

def main() -> f32[3]:
    return f([1.0, 0.0, 2.0], [3.0, 0.0, 1.0])
