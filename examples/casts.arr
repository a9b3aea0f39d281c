# Casts and integer arithmetic with one meaning on every backend (NumPy's where NumPy is defined).
# guards: bounds
# (this example shows defined results of by-zero division and f16 overflow, which the div0 and inf guards
# would report; run `arrc run examples/casts.arr --guards all` to see them)

def to_u8(x: f32[n]) -> u8[n]:
    # float -> int: truncate toward zero, saturate to the range, NaN -> 0
    return x.astype(u8)

def wrap_u8(x: i32[n]) -> u8[n]:
    # int -> int: wrap modulo 2**8, as NumPy and C
    return x.astype(u8)

def floor_div_mod(a: i32[n], b: i32[n]) -> (i32[n], i32[n]):
    # floor division and Python modulo (sign of the divisor); by zero both give 0
    return a // b, a % b

def to_f16(x: f32[n]) -> f16[n]:
    # float -> narrower float: round to nearest even, overflow -> inf
    return x.astype(f16)

def main() -> (u8[6], u8[4], i32[5], i32[5], f16[3]):
    q, r = floor_div_mod([7, -7, 7, -7, 5], [2, 2, -2, -2, 0])
    saturated = to_u8([254.0, 255.0, 256.0, 257.0, -1.0, nan])
    wrapped = wrap_u8([255, 256, 300, -1])
    return saturated, wrapped, q, r, to_f16([1.0, 65504.0, 70000.0])
