"""`conv` (LANGUAGE.md section 13) against `jax.lax.conv_general_dilated` (x64 on) over a generated grid of
spatial ranks, strides, paddings, dilations, groups, layouts and dtypes; its shape rules (symbolic too)
and diagnostics."""
from __future__ import annotations

import itertools
import zlib

import jax
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import arrc

jax.config.update("jax_enable_x64", True)

LAYOUTS = {1: [None, ("NWC", "WIO", "NWC")], 2: [None, ("NHWC", "HWIO", "NHWC"), ("NCHW", "HWIO", "NHWC")],
           3: [None, ("NDHWC", "DHWIO", "NDHWC")]}
DTYPES = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "i32": np.int32}
TOLERANCE = {"f64": 1e-12, "f32": 1e-5, "f16": 1e-2, "bf16": 5e-2, "i32": 0}


def _cases():
    """A fixed, varied slice of the grid (every dimension of it covered; the seed fixes the draw)."""
    rng = np.random.default_rng(13)
    paddings = ["VALID", "SAME", "explicit"]
    for n, layout_index, padding, dtype in itertools.product((1, 2, 3), range(3), paddings, DTYPES):
        layouts = LAYOUTS[n]
        if layout_index >= len(layouts) or (n == 3 and dtype in ("f16", "bf16")):
            continue
        strides = tuple(int(s) for s in rng.integers(1, 3, n))
        lhs = tuple(int(s) for s in rng.integers(1, 3, n)) if padding == "explicit" else (1,) * n
        rhs = tuple(int(s) for s in rng.integers(1, 3, n))
        groups = int(rng.choice([1, 2]))
        pads = [tuple(int(p) for p in rng.integers(-1, 3, 2)) for _ in range(n)] if padding == "explicit" else padding
        yield n, layouts[layout_index], strides, pads, lhs, rhs, groups, dtype


def _operands(n, layout, groups, dtype, rng):
    spec_x, spec_w, _ = layout or ("NC" + "DHW"[-n:], "OI" + "DHW"[-n:], None)
    spatial = {c: int(s) for c, s in zip("DHW"[-n:], rng.integers(5, 9, n))}
    window = {c: int(s) for c, s in zip("DHW"[-n:], rng.integers(1, 4, n))}
    sizes_x = {"N": 2, "C": 2 * groups, **spatial}
    sizes_w = {"O": 2 * groups, "I": 2, **window}
    x = rng.standard_normal([sizes_x[c] for c in spec_x]) * 2
    w = rng.standard_normal([sizes_w[c] for c in spec_w]) * 2
    if dtype == "i32":
        x, w = np.round(x), np.round(w)
    return x.astype(DTYPES[dtype]), w.astype(DTYPES[dtype])


def _arr_args(strides, padding, lhs, rhs, groups, layout) -> str:
    pad = f'"{padding}"' if isinstance(padding, str) else "[" + ", ".join(f"({a}, {b})" for a, b in padding) + "]"
    text = f"strides={strides}, padding={pad}, lhs_dilation={lhs}, rhs_dilation={rhs}, groups={groups}"
    if layout is not None:
        text += ", layout=(" + ", ".join(f'"{s}"' for s in layout) + ")"
    return text.replace(",)", ")")


@pytest.mark.parametrize("case", list(_cases()), ids=lambda c: "-".join(map(str, c)).replace(" ", ""))
def test_conv_matches_lax_conv_general_dilated(case):
    n, layout, strides, padding, lhs, rhs, groups, dtype = case
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()))
    x, w = _operands(n, layout, groups, dtype, rng)
    want = lax.conv_general_dilated(x, w, strides, padding, lhs, rhs, dimension_numbers=layout,
                                    feature_group_count=groups)
    src = (f"def f(x: {dtype}{list(x.shape)}, w: {dtype}{list(w.shape)}) -> {dtype}{list(want.shape)}:\n"
           f"    return conv(x, w, {_arr_args(strides, padding, lhs, rhs, groups, layout)})\n")
    got = arrc.loads(src).f(x, w)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype] * 10)


def test_conv_shapes_are_symbolic_where_the_sizes_are_shape_variables():
    mod = arrc.loads("""
def same(x: f64[b, c, h, w], k: f64[o, c, kh, kw]) -> f64[b, o, (h + 1) // 2, w]:
    return conv(x, k, strides=(2, 1), padding="SAME")

def valid(x: f64[b, c, h, w], k: f64[o, c, kh, kw]) -> f64[b, o, h - kh + 1, w - kw + 1]:
    return conv(x, k)

def grouped(x: f32[n, 6, t], k: f32[4, 3, 3]) -> f32[n, 4, t - 2]:
    return conv(x, k, groups=2)
""")
    rng = np.random.default_rng(0)
    x, k = rng.standard_normal((2, 3, 7, 6)), rng.standard_normal((4, 3, 3, 2))
    np.testing.assert_allclose(mod.same(x, k), lax.conv_general_dilated(x, k, (2, 1), "SAME"), rtol=1e-12)
    np.testing.assert_allclose(mod.valid(x, k), lax.conv_general_dilated(x, k, (1, 1), "VALID"), rtol=1e-12)
    x, k = rng.standard_normal((3, 6, 10)).astype(np.float32), rng.standard_normal((4, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(mod.grouped(x, k), lax.conv_general_dilated(x, k, (1,), "VALID", feature_group_count=2),
                               rtol=1e-5, atol=1e-5)


def test_strides_and_dilations_take_a_list_as_padding_does():
    mod = arrc.loads("def f(x: f32[1, 1, 6, 6], w: f32[1, 1, 3, 3]) -> f32[1, 1, 4, 1]:\n"
                     "    return conv(x, w, strides=[1, 2], rhs_dilation=[1, 2])\n")
    x, w = np.ones((1, 1, 6, 6), np.float32), np.ones((1, 1, 3, 3), np.float32)
    np.testing.assert_array_equal(mod.f(x, w), lax.conv_general_dilated(x, w, (1, 2), "VALID", rhs_dilation=(1, 2)))


@pytest.mark.parametrize("call, code, message", [
    ("conv(x, k)", "E0202", "`conv`: the input has 3 features, the kernel takes 2"),
    ("conv(x, q, groups=2)", "E0202", "`conv`: the input has 3 features, the kernel takes 1 times 2 groups"),
    ("conv(x, v)", "E0202", "`conv` needs an input and a kernel of the same rank"),
    ("conv(x, e, padding=[(0, 0), (-3, 0)])", "E0202", "`conv` leaves spatial dimension 1 empty: the window (3 after "
     "dilation) is larger than the input (5, padded to 2)"),     # (it said "the padded input (5 before padding)")
    ("conv(x, e, padding=[(0, 0), (0, -7)], lhs_dilation=2)", "E0202", "`conv` leaves spatial dimension 1 empty: the "
     "window (3 after dilation) is larger than the input (5, dilated to 9, padded to 2)"),
    ("conv(x, g, padding=\"FULL\")", "E0204", "`padding` must be \"VALID\" or \"SAME\", found \"FULL\""),
    ("conv(x, g, padding=[(1, 1)])", "E0204", "`padding` must be \"VALID\", \"SAME\" or one (low, high) pair per spatial dimension (2 here), "
     "found i32[1, 2]"),
    ("conv(x, g, strides=(1, 2, 3))", "E0204", "`strides` gives 3 values for 2 spatial dimensions"),
    ("conv(x, g, strides=(2,))", "E0204", "`strides` gives 1 value for 2 spatial dimensions"),     # (lax refuses it)
    ("conv(x, g, rhs_dilation=[2])", "E0204", "`rhs_dilation` gives 1 value for 2 spatial dimensions"),
    ("conv(x, g, rhs_dilation=0)", "E0204", "`rhs_dilation` must be at least 1, found 0"),
    ("conv(x, g, layout=(\"NHWC\", \"OIHW\", \"NCHQ\"))", "E0204",
     "the layouts name different spatial dimensions: \"OIHW\" (the kernel's) has HW, \"NCHQ\" (the output's) has HQ"),
    ("conv(x, g, layout=(\"NCHW\", \"OIXY\", \"NCHW\"))", "E0204",
     "the layouts name different spatial dimensions: \"OIXY\" (the kernel's) has XY, \"NCHW\" (the input's) has HW"),
    ("conv(x, g, layout=(\"NCH\", \"OIHW\", \"NCHW\"))", "E0204", "the input layout \"NCH\" does not describe an array"),
    ("conv(x, g, layout=(\"nchw\", \"oihw\", \"nchw\"))", "E0204", "`layout` letters are capitals"),
    ("conv(x, g, layout=\"NHWC\")", "E0204", "`layout` must be three strings"),
    ("conv(b, b)", "E0201", "`conv` is not defined on bool"),
    ("conv(x, g, padding=\"SAME\", lhs_dilation=2)", "E0204",
     "`conv` with \"SAME\" padding cannot dilate the input (`lhs_dilation`), as in JAX"),
])
def test_conv_diagnostics(call, code, message):
    src = (f"def f(x: f32[1, 3, 5, 5], k: f32[4, 2, 3, 3], q: f32[4, 1, 3, 3], v: f32[4, 3, 3], e: f32[4, 3, 1, 3],"
           f" g: f32[4, 3, 3, 3], b: bool[1, 1, 2, 2]) -> f32[1]:\n    y = {call}\n    return zeros(1)\n")
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(src)
    diag = info.value.diagnostics[0]
    assert diag.code == code and diag.message.startswith(message), diag.message


@pytest.mark.parametrize("src, x, w", [
    ("def f(x: f32[1, 1, 4], w: f32[1, 1, 0]) -> f32[1, 1, 5]:\n    return conv(x, w)\n", (1, 1, 4), (1, 1, 0)),
    ("def f(x: f32[1, 4, 1], w: f32[0, 1, 1]) -> f32[1, 8, 1]:\n    return conv_transpose(x, w, strides=2)\n",
     (1, 4, 1), (0, 1, 1)),
    ("def f(x: f32[1, 1, 4], w: f32[1, 1, k]) -> f32[1, 1, 4]:\n    return conv(x, w, padding=\"SAME\")\n",
     (1, 1, 4), (1, 1, 0))])
def test_a_kernel_with_an_empty_spatial_dimension_is_e0202_at_the_call(src, x, w):
    # XLA's verifier refuses a window of size 0: it was E0601, an internal compiler error
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(src).f(np.ones(x, np.float32), np.ones(w, np.float32))
    diag = info.value.diagnostics[0]
    assert diag.code == "E0202" and diag.message.endswith("the kernel's spatial dimension 0 is empty"), diag.message


def test_output_features_that_do_not_split_into_the_groups_are_e0202_at_the_call():
    # the check ran floor division, so 3 // 2 passed and the MLIR verifier raised a traceback; a symbolic
    # count was refused at definition though it can split: it is checked once the function is specialized
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads("def f(x: f64[1, 4, 5], w: f64[3, 2, 3]) -> f64[1, 3, 3]:\n    return conv(x, w, groups=2)\n")
    diag = info.value.diagnostics[0]
    assert diag.code == "E0202" and "3 output features do not split into 2 groups" in diag.message
    assert (diag.span.line, diag.span.col) == (2, 20)
    mod = arrc.loads("def f(x: f64[b, 4, 5], w: f64[o, 2, 3]) -> f64[b, o, 3]:\n    return conv(x, w, groups=2)\n")
    x, w = np.arange(20.).reshape(1, 4, 5), np.arange(24.).reshape(4, 2, 3)
    np.testing.assert_array_equal(mod.f(x, w), lax.conv_general_dilated(x, w, (1,), "VALID", feature_group_count=2))
    with pytest.raises(arrc.CompileError) as info:
        mod.f(x, np.ones((3, 2, 3)))
    assert info.value.diagnostics[0].code == "E0202"

GRAD_CASES = [   # (n, layout, strides, padding, lhs_dilation, rhs_dilation, groups)
    (2, None, (1, 1), "VALID", (1, 1), (1, 1), 1),
    (2, None, (2, 1), "SAME", (1, 1), (1, 2), 1),
    (2, ("NHWC", "HWIO", "NHWC"), (2, 2), [(1, 2), (0, 1)], (1, 1), (2, 1), 2),
    (1, None, (2,), [(2, -1)], (2,), (1,), 2),
    (3, ("NDHWC", "DHWIO", "NDHWC"), (1, 2, 1), "SAME", (1, 1, 1), (1, 1, 2), 1),
    (2, ("NCHW", "HWIO", "NHWC"), (1, 2), [(0, 0), (1, 1)], (2, 1), (1, 1), 3),
]


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: "-".join(map(str, c)).replace(" ", ""))
def test_the_gradient_of_conv_is_jaxs(case):
    """grad with respect to the input and the kernel, against jax.grad (x64): strides, SAME and explicit
    (negative too) padding, both dilations, feature groups, channels-last and mixed layouts, 1-3 spatial
    dimensions."""
    n, layout, strides, padding, lhs, rhs, groups = case
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()))
    x, w = _operands(n, layout, groups, "f64", rng)

    def loss(x, w, c):
        y = lax.conv_general_dilated(x, w, strides, padding, lhs, rhs, dimension_numbers=layout,
                                     feature_group_count=groups)
        return (y * c).sum()
    shape = lax.conv_general_dilated(x, w, strides, padding, lhs, rhs, dimension_numbers=layout,
                                     feature_group_count=groups).shape
    c = rng.standard_normal(shape)
    src = (f"def loss(x: f64{list(x.shape)}, w: f64{list(w.shape)}, c: f64{list(shape)}) -> f64:\n"
           f"    return sum(conv(x, w, {_arr_args(strides, padding, lhs, rhs, groups, layout)}) * c)\n")
    got = arrc.grad(arrc.loads(src).loss, argnums=(0, 1))(x, w, c)
    want = jax.grad(loss, argnums=(0, 1))(x, w, c)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("case", [c for c in GRAD_CASES if c[-1] > 1], ids=lambda c: "-".join(map(str, c)).replace(" ", ""))
def test_forward_mode_and_second_derivatives_of_a_grouped_conv_are_jaxs(case):
    """The kernel's cotangent of a grouped conv has batch groups, which jvp (reverse sweeps) and a second
    derivative differentiate again (they were E0216 "cannot differentiate `convolution`")."""
    n, layout, strides, padding, lhs, rhs, groups = case
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()))
    x, w = _operands(n, layout, groups, "f64", rng)
    tx, tw = rng.standard_normal(x.shape), rng.standard_normal(w.shape)

    def loss(x, w):
        return (lax.conv_general_dilated(x, w, strides, padding, lhs, rhs, dimension_numbers=layout,
                                         feature_group_count=groups) ** 2).sum()
    src = (f"def loss(x: f64{list(x.shape)}, w: f64{list(w.shape)}) -> f64:\n"
           f"    return sum(conv(x, w, {_arr_args(strides, padding, lhs, rhs, groups, layout)}) ** 2)\n\n"
           f"def kernel_grad_norm(x: f64{list(x.shape)}, w: f64{list(w.shape)}) -> f64:\n"
           f"    return sum(grad(loss, argnums=1)(x, w) ** 2)\n")
    mod = arrc.loads(src)
    got, want = arrc.jvp(mod.loss)(x, w, tx, tw), jax.jvp(loss, (x, w), (tx, tw))
    for g, v in zip(got, want):
        np.testing.assert_allclose(g, v, rtol=1e-10)
    got = arrc.grad(mod.kernel_grad_norm, argnums=(0, 1))(x, w)
    want = jax.grad(lambda x, w: (jax.grad(loss, argnums=1)(x, w) ** 2).sum(), argnums=(0, 1))(x, w)
    for g, v in zip(got, want):
        np.testing.assert_allclose(g, v, rtol=1e-10, atol=1e-10 * float(np.abs(v).max()))


def test_a_dtype_the_backend_cannot_convolve_is_a_compile_error_at_the_call(monkeypatch):
    """passes/verify_backend.py, tested on this CPU with a fake entry for `cpu` (on ROCm an f64
    convolution would abort the process); the same function in f32 runs."""
    from arrc.passes import verify_backend
    monkeypatch.setitem(verify_backend.UNSUPPORTED, "cpu", {"stablehlo.convolution": {"f64"}})
    src = ("def blur(x: f64[1, 1, 6, 6], k: f64[1, 1, 3, 3]) -> f64[1, 1, 4, 4]:\n    return conv(x, k)\n\n"
           "def cast(x: f64[1, 1, 6, 6], k: f64[1, 1, 3, 3]) -> f64[1, 1, 4, 4]:\n"
           "    return conv(x.astype(f32), k.astype(f32)).astype(f64)\n")
    mod = arrc.loads(src, filename="blur.arr")
    x, k = np.ones((1, 1, 6, 6)), np.ones((1, 1, 3, 3))
    with pytest.raises(arrc.CompileError) as info:
        mod.blur(x, k)
    assert str(info.value) == """\
error[E0504]: the cpu backend cannot run an f64 convolution
 --> blur.arr:2:12
  |
2 |     return conv(x, k)
  |            ^^^^^^^^^^ an f64 convolution
  |
  = note: cpu has no convolution kernels for f64
  = help: cast the operands (`.astype(f32)`) or run it on another device (`device="cpu"`)
"""
    np.testing.assert_allclose(mod.cast(x, k), np.full((1, 1, 4, 4), 9.0))
    from arrc.passes.verify_backend import VerifyBackend
    assert VerifyBackend("tpu").apply(mod.blur.lower(x, k).module) == []        # f64: measured to run on a v5e
    wide = arrc.loads("def blur(x: i64[1, 1, 6, 6], k: i64[1, 1, 3, 3]) -> i64[1, 1, 4, 4]:\n    return conv(x, k)\n")
    ints = np.ones((1, 1, 6, 6), np.int64), np.ones((1, 1, 3, 3), np.int64)
    assert [d.code for d in VerifyBackend("tpu").apply(wide.blur.lower(*ints).module)] == ["E0504"]
    assert VerifyBackend("rocm").apply(mod.cast.lower(x, k).module) == []


def test_a_platform_not_in_the_table_is_probed_once_in_a_subprocess(tmp_path, monkeypatch):
    """A backend that aborts on f64 convolutions (as ROCm's does): the abort happens in the probe's process;
    the answer is kept in this process and with the compile cache, so a new process does not probe again."""
    import subprocess
    import sys

    from arrc.passes import verify_backend
    monkeypatch.setenv("ARRC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(verify_backend, "_answers", {})
    probed = []

    def probe(platform, dtype):
        probed.append((platform, dtype))
        code = "import os; os.abort()" if dtype == "f64" else "print('ok')"
        return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0
    mod = arrc.loads("def blur(x: f64[1, 1, 6, 6], k: f64[1, 1, 3, 3]) -> f64[1, 1, 4, 4]:\n    return conv(x, k)\n"
                     "def small(x: f32[1, 1, 6, 6], k: f32[1, 1, 3, 3]) -> f32[1, 1, 4, 4]:\n    return conv(x, k)\n",
                     filename="blur.arr")

    def check(name, dtype):
        return verify_backend.VerifyBackend("plugin", probe).apply(
            getattr(mod, name).lower(arrc.spec(f"{dtype}[1, 1, 6, 6]"), arrc.spec(f"{dtype}[1, 1, 3, 3]")).module)
    (refused,) = check("blur", "f64")
    assert (refused.code, refused.message, refused.notes) == (
        "E0504", "the plugin backend cannot run an f64 convolution",
        ["a test convolution in f64 failed on plugin (probed once in a subprocess; the answer is kept with the "
         "compile cache)"])
    assert check("small", "f32") == [] and check("blur", "f64") != []
    assert probed == [("plugin", "f64"), ("plugin", "f32")]
    monkeypatch.setattr(verify_backend, "_answers", {})          # as a new process: the compile cache answers
    assert check("blur", "f64") != [] and check("small", "f32") == [] and len(probed) == 2
    assert verify_backend.probe_in_subprocess("cpu", "f64") is True
    assert verify_backend.probe_in_subprocess("no-such-platform", "f32") is False


TRANSPOSE_CASES = [   # (n, layout, strides, padding, rhs_dilation, transpose_kernel)
    (2, None, (2, 2), "SAME", (1, 1), False),
    (2, None, (2, 1), "VALID", (1, 2), True),
    (1, None, (3,), "SAME", (1,), True),
    (2, ("NCHW", "OIHW", "NCHW"), (2, 2), [(1, 2), (0, 1)], (1, 1), False),
    (3, None, (1, 2, 2), "VALID", (1, 1, 1), False),
]


@pytest.mark.parametrize("case", TRANSPOSE_CASES, ids=lambda c: "-".join(map(str, c)).replace(" ", ""))
def test_conv_transpose_matches_lax_and_its_gradient_jaxs(case):
    n, layout, strides, padding, rhs, flip = case
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()))
    spatial = "HWD"[:n]
    spec_x, spec_w, _ = layout or ("N" + spatial + "C", spatial + "IO", None)
    sizes = {"N": 2, "C": 3, "I": 3, "O": 4, **dict(zip(spatial, rng.integers(3, 6, n).tolist()))}
    kernel = {**sizes, **dict(zip(spatial, rng.integers(1, 4, n).tolist()))}
    if flip:
        kernel["I"], kernel["O"] = 4, 3
    x = rng.standard_normal([sizes[c] for c in spec_x])
    w = rng.standard_normal([kernel[c] for c in spec_w])
    want = lax.conv_transpose(x, w, strides, padding, rhs, dimension_numbers=layout, transpose_kernel=flip)
    pad = f'"{padding}"' if isinstance(padding, str) else "[" + ", ".join(f"({a}, {b})" for a, b in padding) + "]"
    args = f"strides={strides}, padding={pad}, rhs_dilation={rhs}, transpose_kernel={'true' if flip else 'false'}"
    if layout is not None:
        args += ", layout=(" + ", ".join(f'"{s}"' for s in layout) + ")"
    args = args.replace(",)", ")")
    src = (f"def f(x: f64{list(x.shape)}, w: f64{list(w.shape)}) -> f64{list(want.shape)}:\n"
           f"    return conv_transpose(x, w, {args})\n\n"
           f"def loss(x: f64{list(x.shape)}, w: f64{list(w.shape)}) -> f64:\n    return sum(sin(f(x, w)))\n")
    mod = arrc.loads(src)
    np.testing.assert_allclose(mod.f(x, w), want, rtol=1e-12, atol=1e-12)

    def loss(x, w):
        return jax.numpy.sum(jax.numpy.sin(lax.conv_transpose(x, w, strides, padding, rhs, dimension_numbers=layout,
                                                              transpose_kernel=flip)))
    for got, expected in zip(arrc.grad(mod.loss, argnums=(0, 1))(x, w), jax.grad(loss, argnums=(0, 1))(x, w)):
        np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-11)
