"""Adversarial arguments (issue 12 item 8): every call checks its arguments, not only the first one.

A function's `__call__` is jaxlib's C++ dispatcher, which keys an argument by its type as jax sees it.
For a NumPy array jaxlib drops the byte order and, with jax_enable_x64 off, folds 64 bits into 32, so
f64 `[0.1, 1e300, 3]` once reached the entry made for an f32 call and came out narrowed, `2**40 + 5`
came out as `5`, and `'>i4'` `[1, 2, 3]` as `[16777216, ...]` (runtime/pjrt.py `_numpy_node` now puts
the exact dtype in the key). Each case runs good-bad-bad and bad-good-bad on a fresh module, with x64
off (what users have; conftest turns it on for the other suites) and on, through plain, guarded and
printing functions: a bad argument raises ArgumentError with the same whole message on every call, a
good one gives NumPy's numbers. Byte-swapped arrays of the right dtype are accepted as the numbers they
hold (`np.asarray` semantics).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import arrc
from arrc.runtime import pjrt
from arrc.runtime.pjrt import Executable

SRC = """\
def f(x: f32[n]) -> f32[n]:
    return x * 2.0 + 1.0

def i(x: i32[n]) -> i32[n]:
    return x + 1

def u(x: u32[n]) -> u32[n]:
    return x + 1

def b(x: i8[n]) -> i8[n]:
    return x + 1

def s(x: f32) -> f32:
    return x * 2.0 + 1.0

def si(x: i32) -> i32:
    return x + 1

def two(x: f32[n], y: f32[n]) -> f32[n]:
    return x + y
"""

PRINTING = """\
def f(x: f32[n]) -> f32[n]:
    print("x", x)
    return x * 2.0 + 1.0
"""

# The NumPy result of each function on a good argument (x * 2 + 1 is exact in f32: x * 2 is).
REF = {
    "f": lambda x: np.asarray(x, np.float32) * np.float32(2) + np.float32(1),
    "i": lambda x: np.asarray(x, np.int32) + np.int32(1),
    "u": lambda x: np.asarray(x, np.uint32) + np.uint32(1),
    "b": lambda x: np.asarray(x, np.int8) + np.int8(1),
    "s": lambda x: np.asarray(x, np.float32) * np.float32(2) + np.float32(1),
    "si": lambda x: np.asarray(x, np.int32) + np.int32(1),
}


def _jax_f64():
    with jax.enable_x64(True):
        return jnp.asarray(np.array([0.1, 1e300, 3.0]))


# (case, function, good argument, bad argument, the whole ArgumentError message)
BAD = [
    ("f64-into-f32", "f", np.array([0.5, 2.0, -3.0], np.float32), np.array([0.1, 1e300, 3.0]),
     "argument `x` of `f` has type f64[3], expected f32[n]"),
    ("i64-into-i32", "i", np.array([1, -2, 3], np.int32), np.array([2 ** 40 + 5, 1, 2]),
     "argument `x` of `i` has type i64[3], expected i32[n]"),
    ("u64-into-u32", "u", np.array([1, 2, 3], np.uint32), np.array([2 ** 40 + 5, 1, 2], np.uint64),
     "argument `x` of `u` has type u64[3], expected u32[n]"),
    ("big-endian-f64-into-f32", "f", np.array([0.5, 2.0, -3.0], np.float32), np.array([0.1, 1e300, 3.0], ">f8"),
     "argument `x` of `f` has type f64[3], expected f32[n]"),
    ("big-endian-i64-into-i32", "i", np.array([1, -2, 3], np.int32), np.array([2 ** 40 + 5, 1, 2], ">i8"),
     "argument `x` of `i` has type i64[3], expected i32[n]"),
    ("strided-f64-into-f32", "f", np.arange(6, dtype=np.float32)[::2], np.arange(6.0)[::2],
     "argument `x` of `f` has type f64[3], expected f32[n]"),
    ("reversed-f64-into-f32", "f", np.arange(3, dtype=np.float32)[::-1], np.arange(3.0)[::-1],
     "argument `x` of `f` has type f64[3], expected f32[n]"),
    ("f16-into-f32", "f", np.array([0.5, 2.0, -3.0], np.float32), np.array([0.5, 2.0, -3.0], np.float16),
     "argument `x` of `f` has type f16[3], expected f32[n]"),
    ("object-into-f32", "f", np.array([0.5, 2.0, -3.0], np.float32), np.array([0.5, 2.0, -3.0], dtype=object),
     "argument `x`: unsupported dtype object, expected f32[n]"),
    ("bool-into-i8", "b", np.array([1, 0, 1], np.int8), np.array([True, False, True]),
     "argument `x` of `b` has type bool[3], expected i8[n]"),
    ("jax-i32-into-f32", "f", np.array([0.5, 2.0, -3.0], np.float32), jnp.arange(3, dtype=jnp.int32),
     "argument `x` of `f` has type i32[3], expected f32[n]"),
    ("jax-f64-into-f32", "f", jnp.asarray(np.array([0.5, 2.0, -3.0], np.float32)), _jax_f64(),
     "argument `x` of `f` has type f64[3], expected f32[n]"),
    ("0d-f64-into-f32", "s", np.array(0.5, np.float32), np.array(1e300),
     "argument `x` of `s` has type f64, expected f32"),
    ("numpy-f64-scalar-into-f32", "s", np.array(0.5, np.float32), np.float64(1e300),
     "argument `x` of `s` has type f64, expected f32"),
    ("numpy-i64-scalar-into-i32", "si", np.array(7, np.int32), np.int64(2 ** 40 + 5),
     "argument `x` of `si` has type i64, expected i32"),
    ("python-int-out-of-range", "si", np.array(7, np.int32), 2 ** 40 + 5,
     "argument `x`: value out of range for i32"),
    ("python-float-into-i32", "si", 7, 1.5,
     "argument `x` is a Python float, expected i32"),
    ("python-int-past-u64-into-u32", "u", np.array([7], np.uint32), [2 ** 64],
     "argument `x`: value out of range for u32"),
    ("python-str-into-i32", "si", 7, "7",
     "argument `x` is a Python str, expected i32"),
    # Python and NumPy scalars take the dispatcher's fast path too (runtime/pjrt.py `_scalar_node`): an entry
    # made for one never takes another kind, a 64-bit scalar or an int past int32.
    ("python-int-out-of-range-after-python-int", "si", 7, 2 ** 40 + 5,
     "argument `x`: value out of range for i32"),
    ("python-bool-after-python-int", "si", 7, True,
     "argument `x` is a Python bool, expected i32"),
    ("numpy-i64-scalar-after-python-int", "si", 7, np.int64(2 ** 40 + 5),
     "argument `x` of `si` has type i64, expected i32"),
    ("numpy-f64-scalar-after-python-float", "s", 0.5, np.float64(1e300),
     "argument `x` of `s` has type f64, expected f32"),
    ("numpy-f64-scalar-after-numpy-f32-scalar", "s", np.float32(0.5), np.float64(1e300),
     "argument `x` of `s` has type f64, expected f32"),
    ("numpy-f16-scalar-after-numpy-f32-scalar", "s", np.float32(0.5), np.float16(0.5),
     "argument `x` of `s` has type f16, expected f32"),
]

ORDERS = [("good", "bad", "bad"), ("bad", "good", "bad")]


@pytest.fixture(params=[False, True], ids=["x64-off", "x64-on"])
def x64(request):
    with jax.enable_x64(request.param):
        yield request.param


def _first_sentence(err) -> str:
    """The message up to the hint that follows it (what to convert or declare, tests/test_api_first_hour.py)."""
    return str(err).split(". ", 1)[0]


def _run(fn, name, good, bad, message, order):
    for step in order:
        if step == "good":
            np.testing.assert_array_equal(np.asarray(fn(good)), REF[name](good), strict=True)
        else:
            with pytest.raises(arrc.ArgumentError) as info:
                fn(bad)
            assert _first_sentence(info.value) == message


@pytest.mark.parametrize("order", ORDERS, ids=["-".join(o) for o in ORDERS])
@pytest.mark.parametrize("case, name, good, bad, message", BAD, ids=[c[0] for c in BAD])
def test_bad_argument_raises_on_every_call(x64, case, name, good, bad, message, order):
    _run(arrc.loads(SRC)[name], name, good, bad, message, order)


GUARDED = BAD[:6] + BAD[12:14]


@pytest.mark.parametrize("order", ORDERS, ids=["-".join(o) for o in ORDERS])
@pytest.mark.parametrize("case, name, good, bad, message", GUARDED, ids=[c[0] for c in GUARDED])
def test_bad_argument_raises_on_every_call_when_guarded(x64, case, name, good, bad, message, order):
    _run(arrc.loads(SRC, guards="all")[name], name, good, bad, message, order)


@pytest.mark.parametrize("order", ORDERS, ids=["-".join(o) for o in ORDERS])
def test_bad_argument_raises_on_every_call_of_a_printing_function(x64, order, capsys):
    _run(arrc.loads(PRINTING).f, "f", np.array([0.5, 2.0], np.float32), np.array([0.1, 1e300]),
         "argument `x` of `f` has type f64[2], expected f32[n]", order)
    assert capsys.readouterr().out.count("x [") == order.count("good")


@pytest.mark.parametrize("args", [(0.5, 3, True), (np.float32(0.5), np.int32(3), np.bool_(True))],
                         ids=["python", "numpy"])
def test_scalar_arguments_run_in_the_dispatcher(x64, args, monkeypatch):
    """Scalars of the parameters' dtypes (Python's bool/int/float as jax.jit takes them: a float as f32, or
    f64 with x64 on; NumPy's 32-bit ones) do not go through Python after the first call (issue 18:
    +90-135 us a call)."""
    real = "f64" if x64 and type(args[0]) is float else "f32"
    fn = arrc.loads(f"def g(x: {real}, b: bool, k: i32) -> {real}:\n    return where(b, x * {real}(k), x)\n").g
    as_real = np.float64 if real == "f64" else np.float32
    full_calls = []
    call = type(fn)._call
    monkeypatch.setattr(type(fn), "_call", lambda self, *a: full_calls.append(a) or call(self, *a))
    for value in (0.1, 2.0, -1.5):
        x, k, b = type(args[0])(value), args[1], args[2]
        np.testing.assert_array_equal(np.asarray(fn(x, b, k)), as_real(x) * 3, strict=True)
    assert len(full_calls) == 1
    real_scalar = type(args[0])
    np.testing.assert_array_equal(np.asarray(fn(real_scalar(2.0), False, 3)), as_real(2.0), strict=True)
    assert len(full_calls) == (1 if type(args[0]) is float else 2)     # Python scalars: a key of their own
    for value in (1.0, 2.0):        # keywords naming the last parameters, in order (jaxlib sorts them by name)
        np.testing.assert_array_equal(np.asarray(fn(real_scalar(value), b=True, k=3)), as_real(value) * 3,
                                      strict=True)
    assert len(full_calls) == (2 if type(args[0]) is float else 3)
    for value in (1.0, 2.0):        # out of that order: the Python path, every time, and the same numbers
        np.testing.assert_array_equal(np.asarray(fn(k=3, x=real_scalar(value), b=True)), as_real(value) * 3,
                                      strict=True)
    assert len(full_calls) == (4 if type(args[0]) is float else 5)


def test_python_floats_take_each_float_parameter_dtype_as_x64_changes():
    """jaxlib transfers a Python float itself, as f32 with x64 off and f64 with it on (its key tells them
    apart): a parameter of the other float dtype takes the float through Python, rounded to its dtype, on
    every call, however the two modes alternate (a value made f32 for an f64 parameter, or f64 bytes read
    as f32, would show in the last digits of 0.1, or past f32's range)."""
    mod = arrc.loads("def s(x: f32) -> f32:\n    return x * 2.0\n\n"
                     "def d(x: f64) -> f64:\n    return x * 2.0\n\n"
                     "def h(x: f16) -> f16:\n    return x * 2.0\n")
    for on in (False, True, False, True):
        with jax.enable_x64(on):
            for value in (0.1, 1e300, -2.5):
                for name, real in (("s", np.float32), ("d", np.float64), ("h", np.float16)):
                    with np.errstate(over="ignore"):
                        expected = real(value) * real(2)
                    np.testing.assert_array_equal(np.asarray(mod[name](value)), expected, strict=True)


def test_64_bit_numpy_arguments_run_in_the_dispatcher_with_their_64_bits(x64, monkeypatch):
    """f64/i64 NumPy arrays (NumPy's defaults) are transferred with their 64 bits (runtime/pjrt.py
    `_put_on_cpu`) and do not go through Python after the first call (an f32 entry never takes them: the
    cases of BAD above)."""
    mod = arrc.loads("def f(x: f64[3]) -> f64[3]:\n    return x * 2.0\n\n"
                     "def i(x: i64[3]) -> i64[3]:\n    return x + 1\n")
    full_calls = []
    call = type(mod.f)._call
    monkeypatch.setattr(type(mod.f), "_call", lambda self, *a: full_calls.append(a) or call(self, *a))
    for k in range(3):
        x = np.array([0.1, 1e300, 2.0 ** 53 + k])
        np.testing.assert_array_equal(np.asarray(mod.f(x)), x * 2.0, strict=True)
        big = np.array([2 ** 40 + k, -1, 2 ** 62])
        np.testing.assert_array_equal(np.asarray(mod.i(big)), big + 1, strict=True)
    assert len(full_calls) == 2


def test_64_bit_numpy_scalars_run_in_the_dispatcher_with_their_64_bits(x64, monkeypatch):
    """np.int64, np.uint64 and np.float64 scalars (NumPy 2's int64 is the C `long`, a type of its own beside
    `longlong`) are keyed and transferred with their 64 bits, as 64-bit arrays are: a loop count given as
    `np.int64(20)` took the Python path on every call (84 us against 32 us a call)."""
    mod = arrc.loads("def f(x: f64, k: i64, u: u64) -> f64:\n    return x * f64(k) + f64(u)\n")
    full_calls = []
    call = type(mod.f)._call
    monkeypatch.setattr(type(mod.f), "_call", lambda self, *a: full_calls.append(a) or call(self, *a))
    for k in range(3):
        x, i, u = np.float64(0.1 + k), np.int64(2 ** 53 + 1 + k), np.uint64(2 ** 63 + 2 ** 11 * k)
        expected = x * np.float64(i) + np.float64(u)
        np.testing.assert_array_equal(np.asarray(mod.f(x, i, u)), expected, strict=True)
    assert len(full_calls) == 1
    assert {np.int64, np.longlong, np.uint64, np.ulonglong, np.float64} <= set(pjrt.NUMPY_SCALAR_TYPES)


def test_bad_argument_in_a_later_position(x64):
    two = arrc.loads(SRC).two
    x = np.array([0.5, 2.0, -3.0], np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(two(x, x)), x + x, strict=True)
        with pytest.raises(arrc.ArgumentError) as info:
            two(x, np.array([0.1, 1e300, 3.0]))
        assert _first_sentence(info.value) == "argument `y` of `two` has type f64[3], expected f32[n]"
        with pytest.raises(arrc.ArgumentError) as info:
            two(jnp.asarray(x), np.array([1, 2, 3], np.int64))
        assert _first_sentence(info.value) == "argument `y` of `two` has type i64[3], expected f32[n]"


def test_through_load_from_a_file(x64, tmp_path):
    path = tmp_path / "prog.arr"
    path.write_text(SRC)
    f = arrc.load(path).f
    good = np.array([0.5, 2.0, -3.0], np.float32)
    _run(f, "f", good, np.array([0.1, 1e300, 3.0]), "argument `x` of `f` has type f64[3], expected f32[n]",
         ("good", "bad", "good", "bad"))


# ---- byte order: accepted as the numbers the array holds ----------------------------------------------
SWAPPED = [
    ("f", np.array([1.0, 2.0, 3.0], ">f4")),          # was [1, 1, 1] after a native call
    ("i", np.array([1, 2, 3], ">i4")),                # was [16777217, 33554433, 50331649]
    ("u", np.array([1, 2, 2 ** 31], ">u4")),
    ("f", np.arange(6, dtype=">f4")[::2]),
    ("f", np.arange(3, dtype=">f4")[::-1]),
    ("s", np.array(1.5, ">f4")),
    ("s", np.array(1.5, ">f4")[()]),                  # a NumPy scalar in the other byte order
]


@pytest.mark.parametrize("native_first", [True, False], ids=["native-first", "swapped-first"])
@pytest.mark.parametrize("name, swapped", SWAPPED, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SWAPPED)])
def test_byte_swapped_arguments_give_their_numbers(x64, name, swapped, native_first):
    fn = arrc.loads(SRC)[name]
    native = np.asarray(swapped, swapped.dtype.newbyteorder("="))
    expected = REF[name](native)
    calls = [native, swapped, swapped, native] if native_first else [swapped, native, swapped, native]
    for arg in calls:
        np.testing.assert_array_equal(np.asarray(fn(arg)), expected, strict=True)


@pytest.mark.parametrize("guards", [None, "all"])
def test_byte_swapped_arguments_in_two_positions(x64, guards):
    two = arrc.loads(SRC, guards=guards).two
    x = np.array([0.5, 2.0, -3.0], np.float32)
    for a, c in [(x, x), (x.astype(">f4"), x), (x, x.astype(">f4")), (x.astype(">f4"), x.astype(">f4")), (x, x)]:
        np.testing.assert_array_equal(np.asarray(two(a, c)), x + x, strict=True)


# ---- the good kinds of argument keep working after bad ones ----------------------------------------------
def test_good_arguments_of_every_kind_after_bad_ones(x64):
    mod = arrc.loads(SRC)
    x = np.array([0.5, 2.0, -3.0], np.float32)
    goods = [x, x[::-1].copy()[::-1], np.arange(6, dtype=np.float32)[::2], jnp.asarray(x), [0.5, 2.0, -3.0],
             np.asfortranarray(x), np.broadcast_to(np.float32(2), (3,))]
    for bad in [np.asarray(x, np.float64), np.asarray(x, ">f8"), np.asarray(x, np.float16), jnp.asarray(x, jnp.int32)]:
        for good in goods:
            np.testing.assert_array_equal(np.asarray(mod.f(good)), REF["f"](good), strict=True)
            with pytest.raises(arrc.ArgumentError):
                mod.f(bad)
    for good in [np.float32(0.5), np.array(0.5, np.float32), 0.5, 2, jnp.float32(0.5)]:
        np.testing.assert_array_equal(np.asarray(mod.s(good)), REF["s"](good), strict=True)
        with pytest.raises(arrc.ArgumentError):
            mod.s(np.float64(0.5))
        with pytest.raises(arrc.ArgumentError):
            mod.s(np.array(0.5))


# ---- the runtime's Executable (its own dispatcher): never a wrong number ---------------------------------
def test_executable_refuses_or_converts_what_its_entry_was_not_made_for(x64):
    low = arrc.loads(SRC).f.lower(arrc.spec("f32[3]"))
    exe = Executable(low.module, cache=False)
    good = np.array([0.5, 2.0, -3.0], np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(exe([good])[0]), REF["f"](good), strict=True)
        np.testing.assert_array_equal(np.asarray(exe([good.astype(">f4")])[0]), REF["f"](good), strict=True)
        with pytest.raises(jax.errors.JaxRuntimeError, match="expected parameter 0 of size 12"):
            exe([np.array([0.1, 1e300, 3.0])])


# ---- property: random dtype, byte order and strides on one function's accumulated dispatcher ----------------
DTYPES = ["f4", "f8", "f2", "i4", "i8", "u4", "u8", "i2", "u2", "i1", "u1", "b1"]   # NumPy spellings


@pytest.fixture(scope="module")
def shared():
    return arrc.loads(SRC)


@settings(max_examples=80, deadline=None)
@given(dtype=st.sampled_from(DTYPES), order=st.sampled_from("<>="), step=st.sampled_from([1, 2, -1, -2]),
       values=st.lists(st.integers(0, 100), min_size=1, max_size=5), as_jax=st.booleans(), x64_on=st.booleans())
def test_any_array_is_refused_or_computed_right(shared, dtype, order, step, values, as_jax, x64_on):
    base = np.repeat(np.array(values, dtype=np.dtype(dtype).newbyteorder(order)), abs(step))
    arg = base[::step]
    with jax.enable_x64(x64_on):
        if as_jax:
            arg = jnp.asarray(np.asarray(arg, arg.dtype.newbyteorder("=")))
        if np.dtype(arg.dtype).newbyteorder("=") == np.float32:
            np.testing.assert_array_equal(np.asarray(shared.f(arg)), REF["f"](arg), strict=True)
        else:
            with pytest.raises(arrc.ArgumentError,
                               match=r"^argument `x` of `f` has type \w+\[\d+\], expected f32\[n\](\.|$)"):
                shared.f(arg)


@pytest.mark.parametrize("source, args, message", [
    ("def f(x: f32[n + 1]) -> f32[n]:\n    return x[1:]\n", [np.zeros(0, np.float32)],
     "argument `x` of `f` has type f32[0], which as f32[n + 1] makes `n` = -1: a size is never negative"),
    ("def f(x: f32[n + 2]) -> i32:\n    return n\n", [np.zeros(1, np.float32)],
     "argument `x` of `f` has type f32[1], which as f32[n + 2] makes `n` = -1: a size is never negative"),
    ("def f(x: f32[n], y: f32[n - 2]) -> i32:\n    return n\n", [np.zeros(1, np.float32), np.zeros(0, np.float32)],
     "argument `y` of `f` is declared f32[n - 2], which with n = 1 is the size -1: a size is never negative"),
])
def test_a_shape_variable_solved_to_a_negative_size_is_refused(source, args, message):
    """Before: an MLIRError (an invalid tensor dimension) from the lowering, or `n` returned as -1."""
    mod = arrc.loads(source)
    with pytest.raises(arrc.ArgumentError) as err:
        mod.f(*args)
    assert str(err.value) == message
    with pytest.raises(arrc.CompileError, match=r"E0212(.|\n)*makes `n` = -1: a size is never negative"):
        arrc.loads("def g(x: f32[n + 1]) -> f32[n]:\n    return x[1:]\n"
                   "def f(x: f32[k, 0]) -> f32[k, 0]:\n    return vmap(g)(x)\n").f(np.zeros((2, 0), np.float32))


def test_a_python_float_past_f32_is_inf_without_numpys_overflow_warning():
    """As `jnp.asarray(1e40, jnp.float32)`; NumPy's RuntimeWarning leaked to the caller (and to the CLI's
    stderr for `--arg x='[1e40]'`)."""
    import warnings
    mod = arrc.loads("def f(x: f32) -> f32:\n    return x\ndef g(x: f32[1]) -> f32[1]:\n    return x\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mod.f(1e40) == np.inf and mod.g([1e40]).tolist() == [np.inf]


def test_a_signalling_nan_float_is_taken_as_nan_without_a_numpy_warning(x64):
    """A Python float holding a signalling NaN, for a parameter of each float dtype, on the first call, a
    keyword call and a later one: NaN, and no "invalid value encountered in cast" from NumPy."""
    import struct
    import warnings
    snan = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000001))[0]
    for dtype in ("f16", "bf16", "f32", "f64"):
        fn = arrc.loads(f"def f(x: {dtype}) -> {dtype}:\n    return x\n").f
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for result in (fn(snan), fn(x=snan), fn(snan)):
                assert np.isnan(np.asarray(result)), dtype


def test_an_empty_list_takes_any_parameter_dtype():
    """A Python list has no dtype of its own (docs/api.md), an empty one no value either: `[]` for an i32[n]
    is i32[0], as `jnp.asarray([], jnp.int32)`. It was refused as "holds Python floats" (NumPy's float64
    for `[]`), for every non-float parameter; an empty NumPy float64 array stays refused."""
    mod = arrc.loads("def i(x: i32[n]) -> i32[n]:\n    return x\ndef m(x: u8[n, k]) -> u8[n, k]:\n    return x\n"
                     "def b(x: bool[n]) -> bool[n]:\n    return x\n")
    for fn, value, dtype, shape in ((mod.i, [], np.int32, (0,)), (mod.i, (), np.int32, (0,)),
                                    (mod.m, [[], []], np.uint8, (2, 0)), (mod.b, [], np.bool_, (0,))):
        result = fn(value)
        assert (result.dtype, result.shape) == (dtype, shape)
    with pytest.raises(arrc.ArgumentError, match="has type f64"):
        mod.i(np.zeros(0))


def test_a_parameter_named_self_is_passed_by_keyword():
    """`def g(self: f32)` called as `g(self=1.0)`: a TypeError "Function._first_call() got multiple values for
    argument 'self'" (arrc's own method), on the first call and later ones, and through arrc.grad."""
    mod = arrc.loads("def g(self: f32, args: f32 = 2.0) -> f32:\n    return self * args\n")
    assert [float(mod.g(self=1.5)), float(mod.g(self=1.5, args=3.0)), float(mod.g(1.5))] == [3.0, 4.5, 3.0]
    assert float(arrc.grad(mod.g)(self=1.5)) == 2.0


def test_a_jax_key_for_a_numeric_parameter_is_an_argument_error():
    """`f(jax.random.key(0))` for an f32[n] parameter: NumPy's TypeError "Cannot interpret 'key<fry>' as a data
    type" from arrc's dtype lookup, in a call, `lower`, `as_jax` and `arrc.grad`."""
    mod = arrc.loads("def f(x: f32[n]) -> f32[n]:\n    return x\ndef s(x: f32) -> f32:\n    return x\n")
    keys = jax.random.split(jax.random.key(0))
    for call in (lambda: mod.f(keys), lambda: mod.f.lower(keys), lambda: mod.f.as_jax()(keys),
                 lambda: arrc.grad(mod.s)(keys[0])):
        with pytest.raises(arrc.ArgumentError, match=r"argument `x` is a JAX key \(key<fry>\), expected f32"):
            call()
