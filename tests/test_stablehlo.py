"""FileCheck-style checks of the emitted StableHLO, per op family, plus locations and static shapes."""
from __future__ import annotations

import re

import pytest
from conftest import FileCheckFailure, compile_src, filecheck, lower_text

V = "[[{}:%[a-z0-9_#]+]]"      # a capture of an SSA value

SRC = """\
def add_scalar(x: f32[n]) -> f32[n]:
    return x + 1.0

def add_rows(x: f32[m], y: f32[n, m]) -> f32[n, m]:
    return x + y

def mixed(x: i32[n], y: f32[n]) -> f32[n]:
    return x + y

def f64_only(x: f64[n]) -> f64[n]:
    return x * 2.0 + 1

def sum0(x: f32[n, m]) -> f32[m]:
    return sum(x, axis=0)

def sum_keep(x: f32[n, m]) -> f32[n, 1]:
    return sum(x, axis=-1, keepdims=true)

def sum_all(x: f32[a, b, c]) -> f32[b]:
    return sum(x, axis=(0, 2))

def max_all(x: f32[n]) -> f32:
    return max(x)

def any_all(x: bool[n]) -> bool:
    return any(x) and all(x)

def mean0(x: f32[n, m]) -> f32[m]:
    return mean(x, axis=0)

def amax(x: f32[n, m]) -> i32[n]:
    return argmax(x, axis=1)

def to_u8(x: f32[n]) -> u8[n]:
    return x.astype(u8)

def to_i8(x: i32[n]) -> i8[n]:
    return x.astype(i8)

def to_f16(x: f32[n]) -> f16[n]:
    return x.astype(f16)

def to_bool(x: f32[n]) -> bool[n]:
    return x.astype(bool)

def bits(x: f32[n]) -> u32[n]:
    return bitcast(x, u32)

def floordiv(x: i32[n], y: i32[n]) -> i32[n]:
    return x // y

def mod(x: i32[n], y: i32[n]) -> i32[n]:
    return x % y

def floordiv_f(x: f32[n], y: f32[n]) -> f32[n]:
    return x // y

def slice1(x: f32[n]) -> f32[2]:
    return x[1:3]

def rev(x: f32[n]) -> f32[n]:
    return x[::-1]

def stride(x: f32[4]) -> f32[2]:
    return x[::2]

def row(x: f32[n, m]) -> f32[m]:
    return x[0]

def last_col(x: f32[n, m]) -> f32[n]:
    return x[..., -1]

def transpose(x: f32[n, m]) -> f32[m, n]:
    return x.T

def rows_times_matrix(x: f32[b, t, d], w: f32[d, e]) -> f32[b, t, e]:
    return x @ w

def batch_times_batch(x: f32[b, t, d], w: f32[b, d, e]) -> f32[b, t, e]:
    return x @ w

def helper(a: f32[k]) -> f32[k]:
    return a * 2.0

def calls(x: f32[3], y: f32[4]) -> f32:
    return sum(helper(x)) + sum(helper(y)) + sum(helper(x))

def pick(c: bool[n], x: f32[n]) -> f32[n]:
    return where(c, x, 0.0)

def clipped(x: f32[n]) -> f32[n]:
    return clip(x, -1.0, 1.0)

def literal() -> f32[3]:
    return [1.0, 2.0, 3.0]

def nan_test(x: f32[n]) -> bool[n]:
    return isnan(x)

def shape_math(x: f32[n]) -> f32:
    return sum(x) / n

def loop5(x: f32[n]) -> f32[n]:
    for i in range(5):
        x = x + 1.0
    return x

def loop_k(x: f32[n], k: i32) -> f32[n]:
    for i in range(2, k, 3):
        x = x + i
    return x
"""


@pytest.fixture(scope="module")
def mod():
    return compile_src(SRC, filename="k.arr")


def hlo(mod, name, *types, debug_info=False):
    return lower_text(mod, name, *types, debug_info=debug_info)


# ---- the helper itself ----------------------------------------------------------------------------------
def test_filecheck_helper():
    text = "a = foo %1\n%2 = bar %1, %3\nbaz\n"
    assert filecheck(text, "CHECK: [[X:%[0-9]+]]\nCHECK-NEXT: = bar [[X]], {{%[0-9]}}\n"
                           "CHECK-NOT: qux\nCHECK-NEXT: baz") == {"X": "%1"}
    for bad in ["CHECK: bar\nCHECK-NEXT: foo", "CHECK: foo\nCHECK-NOT: bar\nCHECK: baz", "CHECK: [[Y]]",
                "CHECK: [[X:%[0-9]+]]\nCHECK: bar [[X]], [[X]]", "CHECK: foo\nCHECK-NOT: baz"]:
        with pytest.raises(FileCheckFailure):
            filecheck(text, bad)
    filecheck(text, "CHECK: foo\nCHECK-SAME: %1\nCHECK-NOT: foo")


# ---- elementwise ------------------------------------------------------------------------------------------
def test_scalar_literal_is_one_splat_constant(mod):
    """A literal operand becomes a constant of the other operand's shape (XLA splits a splat into a scalar
    and a broadcast itself): one op, not a scalar constant and a broadcast_in_dim."""
    filecheck(hlo(mod, "add_scalar", "f32[4]"), f"""
        CHECK: func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32>
        CHECK: {V.format("C")} = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
        CHECK-NEXT: {V.format("R")} = stablehlo.add %arg0, [[C]] : tensor<4xf32>
        CHECK-NEXT: return [[R]] : tensor<4xf32>
    """)


def test_numpy_broadcasting_maps_trailing_dims(mod):
    filecheck(hlo(mod, "add_rows", "f32[3]", "f32[2, 3]"), f"""
        CHECK: {V.format("B")} = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
        CHECK-NEXT: stablehlo.add [[B]], %arg1 : tensor<2x3xf32>
    """)


def test_implicit_promotion_converts(mod):
    filecheck(hlo(mod, "mixed", "i32[4]", "f32[4]"), f"""
        CHECK: {V.format("C")} = stablehlo.convert %arg0 : (tensor<4xi32>) -> tensor<4xf32>
        CHECK-NEXT: stablehlo.add [[C]], %arg1 : tensor<4xf32>
    """)


def test_f64_stays_f64(mod):
    text = hlo(mod, "f64_only", "f64[4]")
    filecheck(text, """
        CHECK: stablehlo.constant dense<2.000000e+00> : tensor<4xf64>
        CHECK: stablehlo.multiply %arg0, {{%[a-z0-9_]+}} : tensor<4xf64>
        CHECK: stablehlo.add {{%[a-z0-9_]+}}, {{%[a-z0-9_]+}} : tensor<4xf64>
    """)
    assert "f32" not in text


BINARY = [
    ("+", "f32", "stablehlo.add"), ("-", "f32", "stablehlo.subtract"), ("*", "f32", "stablehlo.multiply"),
    ("/", "f32", "stablehlo.divide"), ("**", "f32", "stablehlo.power"),
    ("&", "i32", "stablehlo.and"), ("|", "i32", "stablehlo.or"), ("^", "i32", "stablehlo.xor"),
    ("==", "f32", "stablehlo.compare EQ, %arg0, %arg1, FLOAT"),
    ("!=", "i32", "stablehlo.compare NE, %arg0, %arg1, SIGNED"),
    ("<", "u8", "stablehlo.compare LT, %arg0, %arg1, UNSIGNED"),
    ("<=", "f32", "stablehlo.compare LE"), (">", "f32", "stablehlo.compare GT"),
    (">=", "f32", "stablehlo.compare GE"),
    ("maximum", "f32", "stablehlo.maximum"), ("minimum", "f32", "stablehlo.minimum"),
    ("atan2", "f32", "stablehlo.atan2"), ("pow", "f32", "stablehlo.power"),
    ("and", "bool", "stablehlo.and"), ("or", "bool", "stablehlo.or"),
]


def _binary_src(op, dt):
    out = "bool" if op in ("==", "!=", "<", "<=", ">", ">=") else dt
    expr = f"{op}(x, y)" if op.isalnum() and op not in ("and", "or") else f"x {op} y"
    return f"def f(x: {dt}[n], y: {dt}[n]) -> {out}[n]:\n    return {expr}\n"


@pytest.fixture(scope="module")
def binary_mods():
    return {(op, dt): compile_src(_binary_src(op, dt)) for op, dt, _ in BINARY}


@pytest.mark.parametrize("op, dt, expected", BINARY, ids=[b[0] for b in BINARY])
def test_binary_operator_op(binary_mods, op, dt, expected):
    filecheck(hlo(binary_mods[(op, dt)], "f", f"{dt}[4]", f"{dt}[4]"), f"""
        CHECK: func.func public @main
        CHECK: {V.format("R")} = {expected}
        CHECK-NEXT: return [[R]]
    """)


UNARY = [
    ("exp", "stablehlo.exponential"), ("expm1", "stablehlo.exponential_minus_one"), ("log", "stablehlo.log"),
    ("log1p", "stablehlo.log_plus_one"), ("sqrt", "stablehlo.sqrt"), ("rsqrt", "stablehlo.rsqrt"),
    ("cbrt", "stablehlo.cbrt"), ("sin", "stablehlo.sine"), ("cos", "stablehlo.cosine"), ("tan", "stablehlo.tan"),
    ("tanh", "stablehlo.tanh"), ("asin", "chlo.asin"), ("acos", "chlo.acos"), ("atan", "chlo.atan"),
    ("sinh", "chlo.sinh"), ("cosh", "chlo.cosh"), ("erf", "chlo.erf"), ("sigmoid", "stablehlo.logistic"),
    ("abs", "stablehlo.abs"), ("sign", "stablehlo.sign"), ("floor", "stablehlo.floor"), ("ceil", "stablehlo.ceil"),
    ("round", "stablehlo.round_nearest_even"), ("-", "stablehlo.negate"),
]


@pytest.fixture(scope="module")
def unary_mod():
    src = "".join(f"def u{i}(x: f32[n]) -> f32[n]:\n    return {'-x' if name == '-' else name + '(x)'}\n\n"
                  for i, (name, _) in enumerate(UNARY))
    return compile_src(src)


@pytest.mark.parametrize("i, name, expected", [(i, *u) for i, u in enumerate(UNARY)], ids=[u[0] for u in UNARY])
def test_unary_op(unary_mod, i, name, expected):
    filecheck(hlo(unary_mod, f"u{i}", "f32[4]"), f"""
        CHECK: {V.format("R")} = {expected} %arg0 : {{{{\\(?}}}}tensor<4xf32>
        CHECK-NEXT: return [[R]]
    """)


def test_trunc_isnan_relu_where_clip(mod):
    filecheck(hlo(mod, "nan_test", "f32[4]"), """
        CHECK: [[R:%[0-9]+]] = stablehlo.compare NE, %arg0, %arg0, FLOAT
        CHECK-NEXT: return [[R]]
    """)
    filecheck(hlo(mod, "pick", "bool[4]", "f32[4]"), """
        CHECK: [[R:%[0-9]+]] = stablehlo.select %arg0, %arg1, {{%[a-z0-9_]+}} : tensor<4xi1>, tensor<4xf32>
        CHECK-NEXT: return [[R]]
    """)
    filecheck(hlo(mod, "clipped", "f32[4]"), """
        CHECK: [[M:%[0-9]+]] = stablehlo.maximum %arg0
        CHECK: [[R:%[0-9]+]] = stablehlo.minimum [[M]]
        CHECK-NEXT: return [[R]]
    """)
    m = compile_src("def t(x: f32[n]) -> f32[n]:\n    return trunc(x)\n\n"
                    "def r(x: i32[n]) -> i32[n]:\n    return relu(x)\n")
    filecheck(hlo(m, "t", "f32[4]"), """
        CHECK: [[LT:%[0-9]+]] = stablehlo.compare LT, %arg0
        CHECK: [[C:%[0-9]+]] = stablehlo.ceil %arg0
        CHECK: [[F:%[0-9]+]] = stablehlo.floor %arg0
        CHECK: [[R:%[0-9]+]] = stablehlo.select [[LT]], [[C]], [[F]]
        CHECK-NEXT: return [[R]]
    """)
    filecheck(hlo(m, "r", "i32[4]"), """
        CHECK: [[Z:%[a-z0-9_]+]] = stablehlo.constant dense<0> : tensor<4xi32>
        CHECK: [[R:%[0-9]+]] = stablehlo.maximum %arg0, [[Z]]
    """)


def test_array_literal_is_one_constant(mod):
    filecheck(hlo(mod, "literal"), """
        CHECK: func.func public @main() -> tensor<3xf32>
        CHECK-NEXT: [[C:%[a-z0-9_]+]] = stablehlo.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>
        CHECK-NEXT: return [[C]]
    """)


def test_shape_variable_is_a_compile_time_constant(mod):
    filecheck(hlo(mod, "shape_math", "f32[5]"), """
        CHECK: stablehlo.reduce
        CHECK: stablehlo.constant dense<5.000000e+00> : tensor<f32>
        CHECK: stablehlo.divide
    """)


# ---- reductions -----------------------------------------------------------------------------------------
def test_sum_is_a_reduce(mod):
    filecheck(hlo(mod, "sum0", "f32[2, 3]"), """
        CHECK: [[Z:%[a-z0-9_]+]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
        CHECK-NEXT: [[R:%[0-9]+]] = stablehlo.reduce(%arg0 init: [[Z]]) applies stablehlo.add across dimensions = [0] : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>
        CHECK-NEXT: return [[R]]
    """)


def test_keepdims_reshapes_and_negative_axis(mod):
    filecheck(hlo(mod, "sum_keep", "f32[2, 3]"), """
        CHECK: [[R:%[0-9]+]] = stablehlo.reduce({{.*}}) applies stablehlo.add across dimensions = [1] : {{.*}} -> tensor<2xf32>
        CHECK-NEXT: [[K:%[0-9]+]] = stablehlo.reshape [[R]] : (tensor<2xf32>) -> tensor<2x1xf32>
        CHECK-NEXT: return [[K]]
    """)


def test_tuple_axis(mod):
    filecheck(hlo(mod, "sum_all", "f32[2, 3, 4]"), """
        CHECK: stablehlo.reduce({{.*}}) applies stablehlo.add across dimensions = [0, 2] : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<3xf32>
    """)


def test_max_any_all_mean(mod):
    filecheck(hlo(mod, "max_all", "f32[4]"), """
        CHECK: [[I:%[a-z0-9_]+]] = stablehlo.constant dense<0xFF800000> : tensor<f32>
        CHECK-NEXT: stablehlo.reduce(%arg0 init: [[I]]) across dimensions = [0]
        CHECK-NEXT: reducer(%arg1: tensor<f32>, %arg2: tensor<f32>)
        CHECK-NEXT: [[GT:%[0-9]+]] = stablehlo.compare GT, %arg1, %arg2, FLOAT
        CHECK-NEXT: [[NAN:%[0-9]+]] = stablehlo.compare NE, %arg1, %arg1, FLOAT
        CHECK-NEXT: [[A:%[0-9]+]] = stablehlo.or [[GT]], [[NAN]]
        CHECK-NEXT: [[R:%[0-9]+]] = stablehlo.select [[A]], %arg1, %arg2
        CHECK-NEXT: stablehlo.return [[R]]
    """)   # NaN wins by compare/select, not a bare stablehlo.maximum (XLA:CPU's kernel for that drops NaN)
    filecheck(hlo(mod, "any_all", "bool[4]"), """
        CHECK: stablehlo.constant dense<false> : tensor<i1>
        CHECK-NEXT: [[A:%[0-9]+]] = stablehlo.reduce({{.*}}) applies stablehlo.or across dimensions = [0]
        CHECK: stablehlo.constant dense<true> : tensor<i1>
        CHECK-NEXT: [[B:%[0-9]+]] = stablehlo.reduce({{.*}}) applies stablehlo.and across dimensions = [0]
        CHECK: stablehlo.and [[A]], [[B]]
    """)
    filecheck(hlo(mod, "mean0", "f32[2, 3]"), """
        CHECK: [[S:%[0-9]+]] = stablehlo.reduce({{.*}}) applies stablehlo.add across dimensions = [0]
        CHECK: [[N:%[a-z0-9_]+]] = stablehlo.constant dense<2.000000e+00> : tensor<3xf32>
        CHECK-NEXT: [[R:%[0-9]+]] = stablehlo.divide [[S]], [[N]]
        CHECK-NEXT: return [[R]]
    """)


def test_argmax_is_a_variadic_reduce_with_iota(mod):
    filecheck(hlo(mod, "amax", "f32[2, 3]"), """
        CHECK: [[I:%[0-9]+]] = stablehlo.iota dim = 1 : tensor<2x3xi32>
        CHECK: [[R:%[0-9]+]]:2 = stablehlo.reduce(%arg0 init: {{%[a-z0-9_]+}}), ([[I]] init: {{%[a-z0-9_]+}}) across dimensions = [1]
        CHECK: stablehlo.compare GT
        CHECK: stablehlo.return
        CHECK: return [[R]]#1 : tensor<2xi32>
    """)


# ---- casts ------------------------------------------------------------------------------------------------
def test_float_to_int_is_clamped_not_a_bare_convert(mod):
    filecheck(hlo(mod, "to_u8", "f32[4]"), """
        CHECK: [[CV:%[0-9]+]] = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xui8>
        CHECK: [[HI:%[0-9]+]] = stablehlo.compare GE, %arg0, {{%[a-z0-9_]+}}, FLOAT
        CHECK: [[S1:%[0-9]+]] = stablehlo.select [[HI]], {{%[a-z0-9_]+}}, [[CV]]
        CHECK: [[LO:%[0-9]+]] = stablehlo.compare LT, %arg0, {{%[a-z0-9_]+}}, FLOAT
        CHECK: [[S2:%[0-9]+]] = stablehlo.select [[LO]], {{%[a-z0-9_]+}}, [[S1]]
        CHECK: [[NAN:%[0-9]+]] = stablehlo.compare NE, %arg0, %arg0, FLOAT
        CHECK: [[S3:%[0-9]+]] = stablehlo.select [[NAN]], {{%[a-z0-9_]+}}, [[S2]]
        CHECK-NEXT: return [[S3]] : tensor<4xui8>
    """)
    text = hlo(mod, "to_u8", "f32[4]")
    assert "stablehlo.constant dense<2.560000e+02> : tensor<4xf32>" in text
    assert "stablehlo.constant dense<255> : tensor<4xui8>" in text


def test_int_narrowing_wraps_explicitly(mod):
    filecheck(hlo(mod, "to_i8", "i32[4]"), """
        CHECK: [[U:%[0-9]+]] = stablehlo.bitcast_convert %arg0 : (tensor<4xi32>) -> tensor<4xui32>
        CHECK: [[M:%[a-z0-9_]+]] = stablehlo.constant dense<255> : tensor<4xui32>
        CHECK-NEXT: [[A:%[0-9]+]] = stablehlo.and [[U]], [[M]]
        CHECK-NEXT: [[N:%[0-9]+]] = stablehlo.convert [[A]] : (tensor<4xui32>) -> tensor<4xui8>
        CHECK-NEXT: [[R:%[0-9]+]] = stablehlo.bitcast_convert [[N]] : (tensor<4xui8>) -> tensor<4xi8>
        CHECK-NEXT: return [[R]]
    """)


def test_float_narrowing_bool_and_bitcast(mod):
    filecheck(hlo(mod, "to_f16", "f32[4]"), """
        CHECK: [[R:%[0-9]+]] = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xf16>
        CHECK-NEXT: return [[R]]
    """)
    filecheck(hlo(mod, "to_bool", "f32[4]"), """
        CHECK: [[R:%[0-9]+]] = stablehlo.compare NE, %arg0, {{%[a-z0-9_]+}}, FLOAT
        CHECK-NEXT: return [[R]] : tensor<4xi1>
    """)
    filecheck(hlo(mod, "bits", "f32[4]"), """
        CHECK: [[R:%[0-9]+]] = stablehlo.bitcast_convert %arg0 : (tensor<4xf32>) -> tensor<4xui32>
        CHECK-NEXT: return [[R]]
    """)


# ---- integer division ----------------------------------------------------------------------------------
def test_integer_floor_division_sequence(mod):
    filecheck(hlo(mod, "floordiv", "i32[4]", "i32[4]"), """
        CHECK: [[Z:%[0-9]+]] = stablehlo.compare EQ, %arg1, {{%[a-z0-9_]+}}, SIGNED
        CHECK-NEXT: [[SAFE:%[0-9]+]] = stablehlo.select [[Z]], {{%[a-z0-9_]+}}, %arg1
        CHECK: [[Q:%[0-9]+]] = stablehlo.divide %arg0, {{%[a-z0-9_]+}}
        CHECK-NEXT: [[REM:%[0-9]+]] = stablehlo.remainder %arg0, {{%[a-z0-9_]+}}
        CHECK: stablehlo.subtract [[Q]]
        CHECK: [[R:%[0-9]+]] = stablehlo.select [[Z]], {{%[a-z0-9_]+}}, {{%[0-9]+}}
        CHECK-NEXT: return [[R]]
    """)


def test_integer_modulo_sequence(mod):
    filecheck(hlo(mod, "mod", "i32[4]", "i32[4]"), """
        CHECK: [[Z:%[0-9]+]] = stablehlo.compare EQ, %arg1
        CHECK-NOT: stablehlo.divide
        CHECK: stablehlo.remainder %arg0
        CHECK-NOT: stablehlo.divide
        CHECK: [[R:%[0-9]+]] = stablehlo.select [[Z]]
        CHECK-NEXT: return [[R]]
    """)


def test_float_modulo_takes_the_sign_of_the_divisor():
    m = compile_src(_binary_src("%", "f32"))
    filecheck(hlo(m, "f", "f32[4]", "f32[4]"), """
        CHECK: [[R:%[0-9]+]] = stablehlo.remainder %arg0, %arg1
        CHECK: [[A:%[0-9]+]] = stablehlo.add [[R]], %arg1
        CHECK: [[S:%[0-9]+]] = stablehlo.select {{%[0-9]+}}, [[A]], [[R]]
        CHECK-NEXT: return [[S]]
    """)


def test_float_floor_division(mod):
    filecheck(hlo(mod, "floordiv_f", "f32[4]", "f32[4]"), """
        CHECK: [[M:%[0-9]+]] = stablehlo.remainder %arg0, %arg1
        CHECK: stablehlo.subtract %arg0, [[M]]
        CHECK: stablehlo.compare EQ, %arg1
        CHECK: [[S:%[0-9]+]] = stablehlo.select
        CHECK-NEXT: [[R:%[0-9]+]] = stablehlo.round_nearest_afz [[S]]
        CHECK-NEXT: return [[R]]
    """)


# ---- indexing ---------------------------------------------------------------------------------------------
def test_slices(mod):
    filecheck(hlo(mod, "slice1", "f32[5]"), """
        CHECK: [[R:%[0-9]+]] = stablehlo.slice %arg0 [1:3] : (tensor<5xf32>) -> tensor<2xf32>
        CHECK-NEXT: return [[R]]
    """)
    filecheck(hlo(mod, "rev", "f32[4]"), """
        CHECK: [[V:%[0-9]+]] = stablehlo.reverse %arg0, dims = [0] : tensor<4xf32>
        CHECK-NEXT: [[R:%[0-9]+]] = stablehlo.slice [[V]] [0:4] : (tensor<4xf32>) -> tensor<4xf32>
        CHECK-NEXT: return [[R]]
    """)
    filecheck(hlo(mod, "stride", "f32[4]"), """
        CHECK: [[R:%[0-9]+]] = stablehlo.slice %arg0 [0:3:2] : (tensor<4xf32>) -> tensor<2xf32>
    """)


def test_integer_index_drops_the_dimension(mod):
    filecheck(hlo(mod, "row", "f32[2, 3]"), """
        CHECK: [[S:%[0-9]+]] = stablehlo.slice %arg0 [0:1, 0:3] : (tensor<2x3xf32>) -> tensor<1x3xf32>
        CHECK-NEXT: [[R:%[0-9]+]] = stablehlo.reshape [[S]] : (tensor<1x3xf32>) -> tensor<3xf32>
        CHECK-NEXT: return [[R]]
    """)
    filecheck(hlo(mod, "last_col", "f32[2, 3]"), """
        CHECK: [[S:%[0-9]+]] = stablehlo.slice %arg0 [0:2, 2:3] : (tensor<2x3xf32>) -> tensor<2x1xf32>
        CHECK-NEXT: stablehlo.reshape [[S]] : (tensor<2x1xf32>) -> tensor<2xf32>
    """)


def test_transpose(mod):
    filecheck(hlo(mod, "transpose", "f32[2, 3]"), """
        CHECK: stablehlo.transpose %arg0, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
    """)


def test_a_batch_times_one_matrix_is_one_dot_general(mod):
    """As jnp.matmul: the matrix is not broadcast to the batch (a batched matmul on XLA:CPU was 1.1-1.6x
    slower, issue 18); a batch times a batch is a batched dot_general."""
    filecheck(hlo(mod, "rows_times_matrix", "f32[2, 3, 4]", "f32[4, 5]"), """
        CHECK-NOT: broadcast
        CHECK: stablehlo.dot_general %arg0, %arg1, contracting_dims = [2] x [0] : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
        CHECK-NOT: broadcast
    """)
    filecheck(hlo(mod, "batch_times_batch", "f32[2, 3, 4]", "f32[2, 4, 5]"), """
        CHECK: stablehlo.dot_general %{{.*}}, %{{.*}}, batching_dims = [0] x [0], contracting_dims = [2] x [1]
    """)


# ---- calls ------------------------------------------------------------------------------------------------
def test_calls_are_inlined_with_call_site_locations(mod):
    """docs/language.md: each call is specialized and inlined; its ops carry callsite(callee at caller) locations."""
    text = lower_text(mod, "calls", "f32[3]", "f32[4]")
    filecheck(text, """
        CHECK: func.func public @main(%arg0: tensor<3xf32> {{.*}}, %arg1: tensor<4xf32> {{.*}}) -> tensor<f32>
        CHECK-NOT: call @
        CHECK: stablehlo.multiply %arg0, {{%[a-z0-9_]+}} : tensor<3xf32> loc([[L1:#loc[0-9]+]])
        CHECK: stablehlo.multiply %arg1, {{%[a-z0-9_]+}} : tensor<4xf32> loc([[L2:#loc[0-9]+]])
        CHECK: stablehlo.multiply %arg0, {{%[a-z0-9_]+}} : tensor<3xf32> loc([[L3:#loc[0-9]+]])
        CHECK-NOT: func.func
        CHECK: [[L1]] = loc(callsite([[MUL:#loc[0-9]+]] at [[SITE1:#loc[0-9]+]]))
        CHECK-NEXT: [[L2]] = loc(callsite([[MUL]] at {{#loc[0-9]+}}))
        CHECK-NEXT: [[L3]] = loc(callsite([[MUL]] at {{#loc[0-9]+}}))
    """)
    assert "func.call" not in text and text.count("func.func") == 1
    aliases = dict(_ALIAS.findall(text))
    m = re.search(r"#loc\d+ = loc\(callsite\((#loc\d+) at (#loc\d+)\)\)", text)
    callee, site = _NAME_LOC.match(aliases[m.group(1)]), _NAME_LOC.match(aliases[m.group(2)])
    assert callee.group(1) == "multiply" and site.group(1) == "helper"
    assert _span_text(*_file_span(aliases[callee.group(2)])) == "a * 2.0"
    assert _span_text(*_file_span(aliases[site.group(2)])) == "helper(x)"


# ---- locations and static shapes --------------------------------------------------------------------------
_ALIAS = re.compile(r"^(#loc\d*) = loc\((.*)\)$", re.M)
_TRAILING_LOC = re.compile(r"loc\(([^()]*(?:\([^()]*\))?)\)\s*$")
_OP_LINE = re.compile(r"^\s*(?:%[\w#:]+ = )?(?:stablehlo\.|chlo\.|call @|return\b|func\.)")


def _file_span(loc: str) -> tuple[int, int, int]:
    f = _FILE_LOC.match(loc)
    return int(f.group(2)), int(f.group(3)), int(f.group(5))


def _resolve(loc: str, aliases: dict) -> str:
    while loc.startswith("#loc"):
        loc = aliases[loc]
    return loc


def _locations(text: str):
    """(op line, resolved location) for every operation in the module."""
    aliases = dict(_ALIAS.findall(text))
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if not _OP_LINE.match(line) or line.lstrip().startswith("func.func"):
            continue
        m = _TRAILING_LOC.search(line)
        if not m:                       # an op with a region: its location follows the closing brace
            indent = len(line) - len(line.lstrip())
            close = next(ln for ln in lines[i + 1:] if ln.startswith(" " * indent + "}"))
            m = _TRAILING_LOC.search(close)
        assert m, f"no location on: {line}"
        out.append((line, _resolve(m.group(1), aliases), aliases))
    return out


_NAME_LOC = re.compile(r'^"([^"]+)"\((#loc\d*|".*)\)$')
_FILE_LOC = re.compile(r'^"([^"]+)":(\d+):(\d+) to (\d+)?:(\d+)$')


@pytest.mark.parametrize("name, types", [
    ("add_scalar", ["f32[4]"]), ("sum_keep", ["f32[2, 3]"]), ("to_u8", ["f32[4]"]), ("floordiv", ["i32[4]", "i32[4]"]),
    ("calls", ["f32[3]", "f32[4]"]), ("amax", ["f32[2, 3]"]), ("row", ["f32[2, 3]"]),
    ("literal", []),
])
def test_every_op_has_a_named_file_location_with_end_column(mod, name, types):
    text = lower_text(mod, name, *types)
    locations = _locations(text)
    assert locations
    for line, loc, aliases in locations:
        site = re.fullmatch(r"callsite\((#loc\d+) at (#loc\d+)\)", loc)
        if site:                      # an inlined call: check the callee part and the call site
            assert _NAME_LOC.match(_resolve(site.group(2), aliases)), loc
            loc = _resolve(site.group(1), aliases)
        m = _NAME_LOC.match(loc)
        assert m, f"not a NameLoc: {loc!r} on {line}"
        child = _resolve(m.group(2), aliases)
        f = _FILE_LOC.match(child)
        assert f, f"not a file location with an end: {child!r} on {line}"
        file, l1, c1, l2, c2 = f.groups()
        assert file == "k.arr"
        assert int(l1) >= 1 and int(c1) >= 1
        assert (int(l2) if l2 else int(l1), int(c2)) > (int(l1), int(c1))


def _span_text(line: int, col: int, end_col: int) -> str:
    return SRC.splitlines()[line - 1][col - 1:end_col - 1]


def test_named_locations_point_at_the_source(mod):
    text = lower_text(mod, "add_rows", "f32[3]", "f32[2, 3]")
    aliases = dict(_ALIAS.findall(text))
    named = {}
    for alias, body in aliases.items():
        m = _NAME_LOC.match(body)
        if m:
            f = _FILE_LOC.match(_resolve(m.group(2), aliases))
            named[m.group(1)] = (int(f.group(2)), int(f.group(3)), int(f.group(5)))
    assert _span_text(*named["add"]) == "x + y"
    assert _span_text(*named["add_rows"]) == "add_rows"
    assert _span_text(*named["return"]) == "return x + y"
    assert re.search(r'loc\("add"\(#loc\d+\)\)', text)


def test_names_of_builtin_calls_and_casts(mod):
    assert re.search(r'loc\("sum"\(#loc\d+\)\)', lower_text(mod, "sum0", "f32[2, 3]"))
    assert re.search(r'loc\("astype"\(#loc\d+\)\)', lower_text(mod, "to_u8", "f32[4]"))
    text = lower_text(mod, "calls", "f32[3]", "f32[4]")
    assert re.search(r'loc\("helper"\(#loc\d+\)\)', text)


# ---- loops ------------------------------------------------------------------------------------------------
def test_for_loop_counts_a_known_trip_count(mod):
    """`for` is canonical: a u64 counter k from 0, `k < trip count` as the whole condition, `k + 1` as the
    step, the variable start + k * step; a trip count known at compile time is a constant and an attribute."""
    filecheck(hlo(mod, "loop5", "f32[3]"), f"""
        CHECK: {V.format("TRIP")} = stablehlo.constant dense<5> : tensor<ui64>
        CHECK: stablehlo.constant dense<1> : tensor<ui64>
        CHECK-NEXT: {V.format("ZERO")} = stablehlo.constant dense<0> : tensor<ui64>
        CHECK-NEXT: stablehlo.while(%iterArg = [[ZERO]], %iterArg_{{{{[0-9]+}}}} = %arg0)
        CHECK-SAME: attributes {{arrc.trip_count = 5 : i64}}
        CHECK-NEXT: cond {{
        CHECK-NEXT: {V.format("C")} = stablehlo.compare LT, %iterArg, [[TRIP]], UNSIGNED
        CHECK-NEXT: stablehlo.return [[C]]
        CHECK: {V.format("ONE")} = stablehlo.constant dense<1> : tensor<ui64>
        CHECK-NEXT: {V.format("NEXT")} = stablehlo.add %iterArg, [[ONE]] : tensor<ui64>
        CHECK-NEXT: stablehlo.return [[NEXT]],
    """)


def test_for_loop_with_a_run_time_bound_and_a_literal_step(mod):
    """len(range(2, k, 3)) before the loop: k > 2 ? (k - 2 - 1) // 3 + 1 : 0, in u64 (exact for any i64);
    the trip count attribute says -1 (unknown at compile time)."""
    filecheck(hlo(mod, "loop_k", "f32[3]", "i32"), f"""
        CHECK: {V.format("GT")} = stablehlo.compare GT, {V.format("E")}, {V.format("S")}, SIGNED : (tensor<i64>, tensor<i64>)
        CHECK-NEXT: {V.format("D")} = stablehlo.subtract
        CHECK-NEXT: {V.format("D1")} = stablehlo.subtract [[D]],
        CHECK: stablehlo.divide [[D1]],
        CHECK: {V.format("TRIP")} = stablehlo.select [[GT]],
        CHECK: stablehlo.while
        CHECK-SAME: attributes {{arrc.trip_count = -1 : i64}}
        CHECK: stablehlo.compare LT, %iterArg, [[TRIP]], UNSIGNED
    """)


def test_arguments_have_their_parameter_locations(mod):
    text = lower_text(mod, "add_rows", "f32[3]", "f32[2, 3]")
    aliases = dict(_ALIAS.findall(text))
    # each argument is named after its parameter, at the span of the parameter's type
    arg_locs = re.findall(r"%arg\d+: tensor<[^>]*> loc\(((?:[^()]|\([^()]*\))*)\)", text)
    assert len(arg_locs) == 2
    for loc, name, span_text in zip(arg_locs, ("x", "y"), ("f32[m]", "f32[n, m]")):
        m = _NAME_LOC.match(_resolve(loc, aliases))
        assert m and m.group(1) == name
        assert _span_text(*_file_span(_resolve(m.group(2), aliases))) == span_text


def test_debug_info_off_has_no_locations(mod):
    assert "loc(" not in lower_text(mod, "add_rows", "f32[3]", "f32[2, 3]", debug_info=False)


ALL_FUNCTIONS = [
    ("add_scalar", ["f32[7]"]), ("add_rows", ["f32[5]", "f32[1, 5]"]), ("sum_all", ["f32[1, 2, 3]"]),
    ("mean0", ["f32[3, 1]"]), ("amax", ["f32[1, 9]"]), ("rev", ["f32[1]"]), ("row", ["f32[4, 2]"]),
    ("transpose", ["f32[3, 5]"]), ("calls", ["f32[3]", "f32[4]"]), ("shape_math", ["f32[11]"]),
    ("slice1", ["f32[3]"]), ("last_col", ["f32[1, 1]"]),
]


@pytest.mark.parametrize("name, types", ALL_FUNCTIONS)
def test_no_dynamic_dimension(mod, name, types):
    text = lower_text(mod, name, *types)
    assert not re.search(r"tensor<[^>]*\?", text)
    assert "tensor<*" not in text
