"""The Python API as a NumPy/JAX user meets it in the first hour (issue 17, "Python API"): dtype mismatches
that say what to do, compile-time warnings as Python warnings, JAX's 32-bit arithmetic on f64 results,
`Function.lower` of arrays and `jax.ShapeDtypeStruct`s (and of the guarded module), `repr(Module)`."""
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import arrc

SRC = """\
def nansum(x: f32[n]) -> f32:
    return sum(where(~isnan(x), x, 0))

def double(x: f64[n]) -> f64[n]:
    return x * 2.0

def count(x: i32[n]) -> i32:
    return sum(x)

def scale(x: f32[n, m], k: f32) -> f32[n, m]:
    return x * k

def ratio(x: f32[n], y: f32[n]) -> f32[n]:
    return x / y

def add(x: f32[n], y: f32[n]) -> f32[n]:
    return x + y
"""
LOSSY = "def f(x: i64[n], y: f32[n]) -> f32[n]:\n    return x + y\n"
KEY_TWICE = ("def twice(k: key) -> f32[3]:\n"
             "    a = uniform(k, (3,))\n"
             "    return a + normal(k, (3,))\n")
RECOMPUTED = ("def settle(x: f64) -> f64:\n"
              "    while abs(x) > 1e-6:\n"
              "        x = 0.5 * x\n"
              "    return x * x\n"
              "def slope(x: f64) -> f64:\n"
              "    return grad(settle)(x)\n")


@pytest.fixture(scope="module")
def mod():
    return arrc.loads(SRC, filename="first.arr")


def _arg_error(fn, *args) -> str:
    with pytest.raises(arrc.ArgumentError) as info:
        fn(*args)
    return str(info.value)


# ---- NumPy's default dtypes ----------------------------------------------------------------------------------
def test_numpy_float64_for_an_f32_parameter_says_what_to_do(mod):
    msg = _arg_error(mod.nansum, np.array([1.0, 2.0]))
    assert msg.startswith("argument `x` of `nansum` has type f64[2], expected f32[n]")
    assert "NumPy's default float dtype is float64" in msg
    assert "`x.astype(np.float32)`" in msg and "declare the parameter `f64[n]`" in msg
    assert "loses precision" in msg and "JAX" in msg and "docs/api.md" in msg
    np.testing.assert_allclose(mod.nansum(np.array([1.0, np.nan, 2.0]).astype(np.float32)), 3.0)


def test_numpy_int64_for_an_i32_parameter_says_what_to_do(mod):
    msg = _arg_error(mod.count, np.arange(4))
    assert "has type i64[4], expected i32[n]" in msg and "NumPy's default integer dtype is int64" in msg
    assert "`x.astype(np.int32)`" in msg and "declare the parameter `i64[n]`" in msg
    assert int(mod.count(np.arange(4).astype(np.int32))) == 6


def test_the_hint_names_the_argument_with_the_wrong_dtype(mod):
    msg = _arg_error(mod.scale, np.ones((2, 2), np.float32), np.float64(2.0))
    assert "argument `k`" in msg and "`k.astype(np.float32)`" in msg and "`f64`" in msg
    msg = _arg_error(mod.nansum, np.ones(2, np.float16))                       # widening: no precision story
    assert "`x.astype(np.float32)`" in msg and "`f16[n]`" in msg and "loses precision" not in msg
    msg = _arg_error(mod.double, np.ones(2, np.float32))
    assert "`x.astype(np.float64)`" in msg and "declare the parameter `f32[n]`" in msg


def test_size_mismatches_get_no_dtype_hint(mod):
    msg = _arg_error(mod.add, np.ones(3, np.float32), np.ones(4, np.float32))
    assert "n = 3" in msg and "astype" not in msg
    msg = _arg_error(mod.add, np.ones((3, 1), np.float32), np.ones(3, np.float32))     # rank only
    assert "astype" not in msg
    # dtype and size: converting it alone, or declaring its dtype, would not fix the call
    two = arrc.loads("def two(x: f32[3], y: f32[2]) -> f32:\n    return sum(x) + sum(y)\n").two
    assert _arg_error(two, np.ones(6, np.float16), np.ones(2, np.float32)) == \
        "argument `x` of `two` has type f16[6], expected f32[3]"
    msg = _arg_error(two, np.ones(3), np.ones(5, np.float32))       # (x's size fits: its hint, whatever y is)
    assert msg.startswith("argument `x` of `two` has type f64[3], expected f32[3]. NumPy's default float dtype")


def test_python_values_still_take_the_parameter_dtype(mod):
    assert float(mod.nansum([1.0, 2.0])) == 3.0
    assert int(mod.count([1, 2, 3])) == 6
    # an int past 64 bits is a float for a float parameter (past f64's range, inf as `1e400` is): it was a
    # TypeError about "Python value of kind object", then an OverflowError
    assert float(mod.nansum([2 ** 70, 1])) == np.float32(2.0 ** 70) and np.isinf(mod.nansum([10 ** 400, 1]))


# ---- JAX's 32-bit arithmetic on f64 results ------------------------------------------------------------------
def test_an_f32_jax_array_for_an_f64_parameter_explains_jax_x64(mod):
    with jax.enable_x64(False):
        r = mod.double(np.array([1.0, 2.0]))
        assert r.dtype == np.float64                  # arr's results keep f64 with the flag off
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")           # JAX's own "float64 ... will be truncated" warning
            truncated = r + 1
        assert truncated.dtype == np.float32
        msg = _arg_error(mod.double, truncated)
        assert "jax.Array of float32" in msg and "64-bit mode is off" in msg
        assert 'jax.config.update("jax_enable_x64", True)' in msg and "np.asarray(mod.f(...))" in msg
        out = mod.double(np.asarray(r) + 1)           # the idiom: NumPy arithmetic stays f64
        np.testing.assert_array_equal(np.asarray(out), [6.0, 10.0])
        assert np.asarray(out).dtype == np.float64


def test_with_jax_x64_on_the_result_arithmetic_stays_f64(mod):
    with jax.enable_x64(True):
        r = mod.double(np.array([1.0, 2.0]))
        np.testing.assert_array_equal(np.asarray(mod.double(r + 1)), [6.0, 10.0])
        msg = _arg_error(mod.double, jnp.ones(2, jnp.float32))     # a real f32 array: the plain hint
        assert "64-bit mode is off" not in msg and "`x.astype(np.float64)`" in msg


# ---- warnings -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("src, code", [(LOSSY, "W0001"), (KEY_TWICE, "W0003"), (RECOMPUTED, "W0004")])
def test_warnings_are_python_warnings(src, code):
    with pytest.warns(arrc.ArrWarning) as record:
        mod = arrc.loads(src, filename="w.arr")
    [w] = [w for w in record if issubclass(w.category, arrc.ArrWarning)]
    assert str(w.message).startswith(f"warning[{code}]: ") and "--> w.arr:" in str(w.message)
    assert w.message.diagnostic is mod.warnings[0] and issubclass(w.category, UserWarning)
    assert w.filename == __file__                    # points at the caller's `loads`


def test_warnings_ignore_and_error():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mod = arrc.loads(LOSSY, warnings="ignore")           # no Python warning ...
        assert [d.code for d in mod.warnings] == ["W0001"]   # ... still listed
        assert arrc.loads(SRC).warnings == []                # a clean module warns about nothing
    with pytest.raises(arrc.CompileError):
        arrc.loads(LOSSY, warnings="error")
    with warnings.catch_warnings():
        warnings.simplefilter("error", arrc.ArrWarning)      # the Python way to make them errors
        with pytest.raises(arrc.ArrWarning):
            arrc.loads(LOSSY)


def test_load_warns_too(tmp_path):
    path = tmp_path / "lossy.arr"
    path.write_text(LOSSY)
    with pytest.warns(arrc.ArrWarning, match=re.escape(f"--> {path}:2:12")):
        arrc.load(path)


@pytest.mark.parametrize("call", [lambda: arrc.loads(LOSSY, warnings="bogus"),
                                  lambda: arrc.load("nowhere.arr", warnings="off")])
def test_an_unknown_warnings_mode_is_refused(call):
    with pytest.raises(ValueError, match="warnings must be one of 'warn', 'ignore', 'error'"):
        call()


# ---- lower ----------------------------------------------------------------------------------------------------
def test_lower_takes_arrays_structs_and_scalars(mod):
    want = mod.scale.lower(arrc.spec("f32[2, 3]"), arrc.spec("f32")).as_text()
    x = np.ones((2, 3), np.float32)
    for args in [(x, np.float32(2)), (x, 2.0), (x, 2), (jnp.asarray(x), jnp.float32(2)),
                 (jax.ShapeDtypeStruct((2, 3), np.float32), jax.ShapeDtypeStruct((), jnp.float32)),
                 (arrc.spec("f32[2, 3]"), 2.5)]:
        assert mod.scale.lower(*args).as_text() == want
    mod.scale.compile(x, 1.0)


def test_lower_refuses_what_is_not_a_type_or_value(mod):
    for bad in ["f32[2]", None, object(), [1.0, 2.0]]:
        with pytest.raises(TypeError, match=r"argument `x` of lower/compile must be a type \(`arrc.spec"):
            mod.nansum.lower(bad)
    msg = _arg_error(mod.nansum.lower, np.ones(2))                     # a value of the wrong dtype
    assert "`x.astype(np.float32)`" in msg
    assert "takes 2 argument(s), 1 given" in _arg_error(mod.add.lower, np.ones(2, np.float32))
    with pytest.raises(arrc.ArgumentError, match="unsupported dtype complex64"):
        mod.nansum.lower(jax.ShapeDtypeStruct((2,), np.complex64))


def test_lower_of_keys_and_derivatives():
    mod = arrc.loads("def draw(k: key) -> f32[3]:\n    return uniform(k, (3,))\n"
                     "def sq(x: f64[n]) -> f64:\n    return sum(x * x)\n")
    want = mod.draw.lower(arrc.spec("key")).as_text()
    assert mod.draw.lower(arrc.key(0)).as_text() == want
    assert mod.draw.lower(jax.ShapeDtypeStruct((), jax.random.key(0).dtype)).as_text() == want
    text = arrc.grad(mod.sq).lower(np.ones(4)).as_text()
    assert "tensor<4xf64>" in text


def test_lower_is_unguarded_and_guarded_true_gives_what_runs():
    src = "def ratio(x: f32[n], y: f32[n]) -> f32[n]:\n    return x / y\n"
    plain, guarded = arrc.loads(src), arrc.loads(src, guards="all")
    x = np.ones(3, np.float32)
    text = plain.ratio.lower(x, x).as_text()
    assert guarded.ratio.lower(x, x).as_text() == text            # the front end's StableHLO, unguarded
    assert "arrc.guards" not in text
    checked = guarded.ratio.lower(x, x, guarded=True).as_text()
    assert 'arrc.guards = "bounds,div0,inf,nan"' in checked and 'arrc.check_results = "inf,nan"' in checked
    assert plain.ratio.lower(x, x, guarded=True).as_text() == checked   # no guards: all kinds, as --emit guarded
    assert 'arrc.guards = "nan"' in arrc.loads(src, guards="nan").ratio.lower(x, x, guarded=True).as_text()
    every_op = arrc.loads(src, guards="all", guard_scope="all-ops").ratio.lower(x, x, guarded=True).as_text()
    assert "stablehlo.is_finite" in every_op and "custom_call" in every_op and "custom_call" not in text
    sq = arrc.grad(arrc.loads("def sq(x: f64[n]) -> f64:\n    return sum(sqrt(x))\n", guards="all").sq)
    assert "arrc.guards" in sq.lower(np.ones(2), guarded=True).as_text()      # guards cover the derivative


# ---- repr -----------------------------------------------------------------------------------------------------
def test_module_repr(mod):
    text = repr(mod)
    assert text.startswith("<arr module 'first.arr': 6 functions\n") and text.endswith(">")
    assert "  nansum(x: f32[n]) -> f32\n" in text and "  scale(x: f32[n, m], k: f32) -> f32[n, m]" in text
    assert repr(arrc.loads("const K: i32 = 1\n")) == "<arr module '<string>': no functions>"
    assert "(guards='all', device='gpu')" in repr(arrc.loads(SRC, guards="all", device="gpu"))


def test_module_repr_is_truncated():
    many = arrc.loads("".join(f"def f{i}(x: f32) -> f32:\n    return x\n" for i in range(30)))
    lines = repr(many).splitlines()
    assert lines[0] == "<arr module '<string>': 30 functions"
    assert len(lines) == 1 + arrc.Module.REPR_FUNCTIONS + 1
    assert lines[-1] == f"  ... and {30 - arrc.Module.REPR_FUNCTIONS} more (`.functions` lists them all)>"
