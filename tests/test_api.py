"""The Python API (LANGUAGE.md section 10): modules, functions, signatures, arguments, results, errors."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import arrc
from arrc.compiler.diagnostics import CompileError

SRC = """\
const K: i32 = 4

def add(x: f32[n], y: f32[n]) -> f32[n]:
    return x + y

def scale(x: f32[n, m], k: f32) -> f32[n, m]:
    return x * k

def pair(a: f64[n, n], v: f64[n]) -> (f64[n], f64):
    return v * 2.0, sum(v)

def grow(x: f32[2 * n + 1]) -> f32[2 * n + 1]:
    return x * n

def fixed(x: i32[K], y: u8) -> i32[K]:
    return x + y

def third(x: f32[n]) -> f32:
    return x[3]

def mask(x: bool[n], y: i64[n]) -> i64[n]:
    return where(x, y, 0)

def none() -> f32[3]:
    return [1.0, 2.0, 3.0]
"""


@pytest.fixture(scope="module")
def mod():
    return arrc.loads(SRC, filename="api.arr")


# ---- modules and signatures -----------------------------------------------------------------------------
@pytest.mark.parametrize("name, signature", [
    ("add", "(x: f32[n], y: f32[n]) -> f32[n]"),
    ("scale", "(x: f32[n, m], k: f32) -> f32[n, m]"),
    ("pair", "(a: f64[n, n], v: f64[n]) -> (f64[n], f64)"),
    ("grow", "(x: f32[2 * n + 1]) -> f32[2 * n + 1]"),
    ("fixed", "(x: i32[4], y: u8) -> i32[4]"),
    ("none", "() -> f32[3]"),
])
def test_signature(mod, name, signature):
    assert mod[name].signature == signature
    assert repr(mod[name]) == f"<arr function {name}{signature}>"


def test_module_lookup(mod):
    assert mod["add"] is mod.add
    assert "add" in mod and "nope" not in mod and "K" not in mod
    assert set(mod.functions) == {"add", "scale", "pair", "grow", "fixed", "third", "mask", "none"}
    assert "add" in dir(mod)
    with pytest.raises(AttributeError, match="no function `nope`"):
        mod.nope
    with pytest.raises(KeyError, match="nope"):
        mod["nope"]
    assert mod.add.shape_vars == ["n"] and mod.scale.shape_vars == ["n", "m"]


def test_loads_reports_compile_errors_as_compile_error():
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads("def f(x: f32) -> f32:\n    return y\n", filename="bad.arr")
    err = info.value
    assert isinstance(err, Exception) and arrc.CompileError is CompileError
    [d] = err.diagnostics
    assert isinstance(d, arrc.Diagnostic)
    assert (d.code, d.severity, d.message) == ("E0101", "error", "undefined name `y`")
    assert (d.span.file, d.span.line, d.span.col, d.span.end_line, d.span.end_col) == ("bad.arr", 2, 12, 2, 13)
    assert d.notes == [] and d.help is None and d.label == "not defined"
    assert str(err).startswith("error[E0101]: undefined name `y`\n --> bad.arr:2:12\n")


def test_load_from_a_file(tmp_path):
    path = tmp_path / "m.arr"
    path.write_text("def f(x: f32[n]) -> f32:\n    return sum(x)\n")
    mod = arrc.load(path)
    assert float(mod.f(np.arange(4, dtype=np.float32))) == 6.0
    bad = tmp_path / "bad.arr"
    bad.write_bytes(b"def f(x: f32) -> f32:\n    return x \xfe\n")
    with pytest.raises(arrc.CompileError) as info:
        arrc.load(bad)
    assert info.value.diagnostics[0].code == "E0003"
    assert info.value.diagnostics[0].span.file == str(bad)


# ---- calling ---------------------------------------------------------------------------------------------
def test_results_are_jax_arrays(mod):
    out = mod.add(np.ones(3, np.float32), np.full(3, 2.0, np.float32))
    assert isinstance(out, jax.Array)
    assert out.dtype == np.float32 and out.shape == (3,)
    np.testing.assert_array_equal(np.asarray(out), [3.0, 3.0, 3.0])


def test_tuple_results(mod):
    out = mod.pair(np.eye(2), np.array([1.0, 2.0]))
    assert isinstance(out, tuple) and len(out) == 2
    v, s = out
    assert isinstance(v, jax.Array) and isinstance(s, jax.Array)
    assert v.dtype == np.float64 and s.shape == ()
    np.testing.assert_array_equal(np.asarray(v), [2.0, 4.0])
    assert float(s) == 3.0


def test_no_argument_function(mod):
    np.testing.assert_array_equal(np.asarray(mod.none()), [1.0, 2.0, 3.0])


def test_keyword_arguments(mod):
    x, y = np.ones(2, np.float32), np.arange(2, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(mod.add(y=y, x=x)), [1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(mod.add(x, y=y)), [1.0, 2.0])


def test_jax_arrays_as_arguments_and_chained_calls(mod):
    x = jnp.arange(3, dtype=jnp.float32)
    out = mod.add(x, x)
    again = mod.add(out, x)                     # a result goes straight back in
    assert isinstance(again, jax.Array)
    np.testing.assert_array_equal(np.asarray(again), [0.0, 3.0, 6.0])
    m = mod.mask(jnp.array([True, False]), jnp.array([2 ** 40, 5], dtype=jnp.int64))
    np.testing.assert_array_equal(np.asarray(m), [2 ** 40, 0])


def test_python_scalars_and_nested_lists(mod):
    np.testing.assert_array_equal(np.asarray(mod.add([1, 2, 3], [0.5, 0.5, 0.5])), [1.5, 2.5, 3.5])
    np.testing.assert_array_equal(np.asarray(mod.scale([[1, 2], [3, 4]], 2.5)), [[2.5, 5.0], [7.5, 10.0]])
    out = mod.scale([[1.0]], 3)                 # a Python int for a float parameter
    assert out.dtype == np.float32 and float(out[0, 0]) == 3.0
    np.testing.assert_array_equal(np.asarray(mod.fixed([1, 2, 3, 4], 250)), [251, 252, 253, 254])
    np.testing.assert_array_equal(np.asarray(mod.mask([True, False, True], [1, 2, 3])), [1, 0, 3])
    np.testing.assert_array_equal(np.asarray(mod.fixed(np.array([1, 2, 3, 4], np.int32), np.uint8(7))),
                                  [8, 9, 10, 11])


def test_shape_expressions_in_signatures(mod):
    out = mod.grow(np.ones(7, np.float32))      # 2 * n + 1 = 7 -> n = 3
    np.testing.assert_array_equal(np.asarray(out), np.full(7, 3.0))
    with pytest.raises(arrc.ArgumentError, match=r"expected f32\[2 \* n \+ 1\]"):
        mod.grow(np.ones(6, np.float32))


# ---- argument errors ---------------------------------------------------------------------------------------
def _arg_error(fn, *args, **kwargs) -> str:
    with pytest.raises(arrc.ArgumentError) as info:
        fn(*args, **kwargs)
    assert isinstance(info.value, TypeError)
    return str(info.value)


def test_wrong_dtype_names_the_parameter(mod):
    msg = _arg_error(mod.add, np.ones(3, np.float32), np.ones(3, np.int32))
    assert "`y`" in msg and "i32[3]" in msg and "f32[n]" in msg
    msg = _arg_error(mod.pair, np.eye(2, dtype=np.float32), np.ones(2))
    assert "`a`" in msg and "f32[2, 2]" in msg and "f64[n, n]" in msg


def test_wrong_rank(mod):
    msg = _arg_error(mod.add, np.ones((3, 1), np.float32), np.ones(3, np.float32))
    assert "`x`" in msg and "f32[3, 1]" in msg and "f32[n]" in msg
    msg = _arg_error(mod.scale, np.ones((2, 2), np.float32), np.ones(1, np.float32))
    assert "`k`" in msg


def test_inconsistent_shape_variables(mod):
    msg = _arg_error(mod.add, np.ones(3, np.float32), np.ones(4, np.float32))
    assert "`y`" in msg and "f32[4]" in msg and "f32[3]" in msg and "n = 3" in msg
    msg = _arg_error(mod.pair, np.ones((2, 3)), np.ones(2))
    assert "`a`" in msg
    msg = _arg_error(mod.fixed, np.ones(5, np.int32), 1)
    assert "`x`" in msg and "i32[4]" in msg


def test_argument_count_and_names(mod):
    x = np.ones(2, np.float32)
    assert "takes 2 argument(s), 3 given" in _arg_error(mod.add, x, x, x)
    assert "missing argument `y`" in _arg_error(mod.add, x)
    assert "no parameter `z`" in _arg_error(mod.add, x, x, z=x)
    assert "`x` twice" in _arg_error(mod.add, x, x=x)


@pytest.mark.parametrize("args", [
    (["a", "b"], [1.0, 2.0]),                   # strings
    ([1.5, 2.5], [[1.0], [2.0]]),               # rank
    ([[1.0, 2.0], [3.0]], [1.0, 2.0]),          # ragged
    ([True, False], [1.0, 2.0]),                # bools for a float parameter
    (np.ones(2, np.complex64), np.ones(2, np.float32)),   # unsupported dtype
])
def test_bad_python_arguments(mod, args):
    _arg_error(mod.add, *args)


def test_a_list_of_complex_numbers_is_named_in_english(mod):
    """It said "holds Python complexs"."""
    assert "argument `x` holds Python complex numbers, expected f32[n]" in _arg_error(mod.add, [1j, 2.0], [1.0, 2.0])



def test_python_values_out_of_range(mod):
    assert "`y`" in _arg_error(mod.fixed, [1, 2, 3, 4], 300)
    assert "`y`" in _arg_error(mod.fixed, [1, 2, 3, 4], -1)
    assert "`x`" in _arg_error(mod.fixed, [1, 2, 3, 2 ** 31], 1)
    assert "`y`" in _arg_error(mod.fixed, [1, 2, 3, 4], 2.5)         # a float for an integer parameter


# ---- specialization ------------------------------------------------------------------------------------------
def test_symbolic_condition_checked_at_specialization(mod):
    assert float(mod.third(np.arange(5, dtype=np.float32))) == 3.0
    with pytest.raises(arrc.CompileError) as info:
        mod.third(np.arange(2, dtype=np.float32))
    [d] = info.value.diagnostics
    assert d.code == "E0208"
    assert (d.span.file, d.span.line, d.span.col) == ("api.arr", 19, 14)
    assert "n = 2" in str(info.value)
    with pytest.raises(arrc.CompileError):
        mod.third.lower(arrc.spec("f32[3]"))
    assert "stablehlo" in mod.third.lower(arrc.spec("f32[4]")).as_text()


def test_lower_and_spec(mod):
    t = arrc.spec("f32[2, 3]")
    assert str(t) == "f32[2, 3]"
    lowered = mod.scale.lower(t, arrc.spec("f32"))
    text = lowered.as_text(debug_info=True)
    assert "func.func public @main(%arg0: tensor<2x3xf32>" in text
    assert "loc(" in text and "loc(" not in lowered.as_text()      # as JAX's: no locations unless asked
    assert not any("?" in line for line in text.splitlines() if "tensor<" in line)
    with pytest.raises(ValueError):
        arrc.spec("f32[n]")
    with pytest.raises(arrc.CompileError):
        arrc.spec("f31[2]")
    with pytest.raises(arrc.ArgumentError):
        mod.add.lower(arrc.spec("f32[2]"), arrc.spec("f32[3]"))


def test_specializations_are_cached(mod, monkeypatch):
    fn = mod.add
    calls = []
    original = fn.lower

    def counting(*types):
        calls.append(types)
        return original(*types)
    monkeypatch.setattr(fn, "lower", counting)
    x5 = np.ones(5, np.float32)
    fn(x5, x5)
    fn(x5 * 2, x5)
    assert len(calls) <= 1
    fn(np.ones(6, np.float32), np.ones(6, np.float32))
    fn(np.ones(6, np.float32), np.ones(6, np.float32))
    assert len(calls) <= 2


# ---- warnings -----------------------------------------------------------------------------------------------
def test_module_warnings():
    src = "def f(x: i64[n], y: f32[n]) -> f32[n]:\n    return x + y\n"
    with pytest.warns(arrc.ArrWarning, match=r"warning\[W0001\]"):      # also a Python warning
        mod = arrc.loads(src)
    [w] = mod.warnings
    assert (w.code, w.severity) == ("W0001", "warning")
    assert arrc.loads("def f(x: f32) -> f32:\n    return x\n").warnings == []
    with pytest.raises(arrc.CompileError) as info:
        arrc.loads(src, warnings="error")
    assert [d.code for d in info.value.diagnostics] == ["W0001"]


# ---- 64-bit without jax_enable_x64 -----------------------------------------------------------------------------
def test_64_bit_values_survive_without_the_x64_flag():
    """f64/i64 are honoured with no global flag: run in a fresh interpreter where x64 is off."""
    code = textwrap.dedent("""
        import jax, numpy as np, arrc
        assert not jax.config.jax_enable_x64
        mod = arrc.loads("def f(x: f64[n], y: i64[n]) -> (f64[n], i64[n]):\\n    return x * 1.0, y + 1\\n")
        a, b = mod.f(np.array([1 + 2 ** -40]), np.array([2 ** 60], np.int64))
        assert a.dtype == np.float64 and b.dtype == np.int64, (a.dtype, b.dtype)
        assert float(np.asarray(a)[0]) == 1 + 2 ** -40
        assert int(np.asarray(b)[0]) == 2 ** 60 + 1
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("ok")


def test_a_calls_small_results_are_read_when_ready_and_whether_it_runs_inline(monkeypatch):
    """runtime/pjrt.py `read_when_ready` (a PAST value, a guard's flag, a scalar result): element `index`, of
    every dtype it reads through the buffer protocol and of one it does not (bf16), polled or not: the
    buffer protocol waits for a result not yet computed. `Executable.runs_inline` says where XLA:CPU runs
    the program on the calling thread (under 1,000 flops), which a call then reads without polling."""
    import types
    from arrc.runtime import pjrt
    pjrt._bind_jax()
    for dtype in (jnp.bool_, jnp.int32, jnp.int64, jnp.float16, jnp.float32, jnp.float64, jnp.bfloat16):
        values = jnp.asarray([0, 3, -2] if dtype != jnp.bool_ else [False, True, False], dtype)
        assert type(values) is pjrt._ArrayImpl
        expected = np.asarray(values)
        with monkeypatch.context() as patch:       # (the buffer protocol only, where it reads the dtype)
            if np.dtype(dtype) in pjrt._UNPACK:
                patch.setattr(pjrt, "np", types.SimpleNamespace(asarray=None))
            for index in range(3):
                assert pjrt.read_when_ready(values, index, poll=index == 1) == expected[index]
    slow = jax.jit(lambda a: (a @ a @ a @ a).sum())
    a = jnp.full((600, 600), 0.001, jnp.float32)
    for poll in (True, False):
        assert pjrt.read_when_ready(slow(a), 0, poll) == np.asarray(slow(a))
    mod = arrc.loads("def tiny(x: f32[4]) -> f32[4]:\n    return x + 1.0\n\n"
                     "def big(a: f32[64, 64]) -> f32[64, 64]:\n    return a @ a\n")
    mod.tiny(np.ones(4, np.float32))
    mod.big(np.ones((64, 64), np.float32))
    [(tiny, _)], [(big, _)] = mod.tiny._compiled.values(), mod.big._compiled.values()
    assert tiny.executable.runs_inline and not big.executable.runs_inline
    assert not mod.tiny._polls and mod.big._polls      # (what the dispatcher ran: read without polling or not)


def test_wrong_kinds_of_api_arguments_are_type_errors_in_the_api_s_words():
    """bytes, None or an int where text goes, a non-dict of externs, a bool or int for guards (they were
    the parser's "a bytes-like object is required, not 'str'", "argument of type 'NoneType' is not
    iterable", an AttributeError, and "'int' object is not iterable")."""
    src = "def f() -> i32:\n    return 1\n"
    cases = [(lambda: arrc.loads(src.encode()), r"loads takes the program's text \(a str\), not bytes; for bytes, "
                                                r"arrc\.loads\(data\.decode\(\)\)"),
             (lambda: arrc.loads(None), r"loads takes the program's text \(a str\), not NoneType"),
             (lambda: arrc.loads(src, filename=3), r"filename is a name \(a str\), not int"),
             (lambda: arrc.spec(3), r"spec takes a type's text such as \"f32\[2, 3\]\" \(a str\), not int"),
             (lambda: arrc.loads(src, externs=3), r"externs is a dict of JAX functions .*, not int"),
             (lambda: arrc.loads(src, guards=True), r"guards are a str such as \"nan,inf\" .*, not True")]
    for call, message in cases:
        with pytest.raises(TypeError, match=message):
            call()
    assert arrc.loads(src, guards=["nan", "inf"]).f() == 1


def test_constants_of_another_kind_are_a_type_error():
    """A str or a dict keyed by non-names for `constants` (it was an AttributeError from the checker, or a name
    1 bound and never used)."""
    src = "def f() -> i32:\n    return 1\n"
    for constants, what in [("K", "str"), ([("K", 1)], "list"), ({1: 2}, "a dict with a name that is not a str")]:
        with pytest.raises(TypeError, match=rf"constants is a dict of values by their names .*, not {what}$"):
            arrc.loads(src, constants=constants)
    assert arrc.loads("def f() -> i32:\n    return K\n", constants={"K": np.int32(5)}).f() == 5


def test_lower_and_compile_take_keywords_as_a_call_does(mod):
    """`f.lower(x=..., y=...)` was "lower() got an unexpected keyword argument 'x'" (jax.jit(f).lower takes
    them), though a call binds keywords."""
    f32_3 = arrc.spec("f32[3]")
    by_name = mod.add.lower(y=f32_3, x=np.ones(3, np.float32))
    assert by_name.as_text() == mod.add.lower(f32_3, f32_3).as_text()
    assert mod.add.lower(np.ones(3, np.float32), y=f32_3, guarded=True).as_text()
    mod.add.compile(f32_3, y=f32_3)
    with pytest.raises(arrc.ArgumentError, match=r"add\(\) has no parameter `z`"):
        mod.add.lower(f32_3, z=f32_3)
    with pytest.raises(arrc.ArgumentError, match=r"add\(\) got `x` twice"):
        mod.add.compile(f32_3, x=f32_3)


def test_lowered_compiles_for_its_types_as_jax_compiled(mod):
    """`f.lower(x).compile()` (JAX's ahead-of-time form) was "'Lowered' object has no attribute 'compile'",
    and `f.compile(...)` returned None: both give the function for those types, which refuses others."""
    x = np.arange(3, dtype=np.float32)
    compiled = mod.add.lower(x, arrc.spec("f32[3]")).compile()
    assert isinstance(compiled, arrc.Compiled)
    np.testing.assert_array_equal(compiled(x, y=x), x + x)
    with pytest.raises(TypeError, match=r"add was compiled for \(f32\[3\], f32\[3\]\), called with "
                                        r"\(f32\[4\], f32\[4\]\)"):
        compiled(np.ones(4, np.float32), np.ones(4, np.float32))
    np.testing.assert_array_equal(mod.add.compile(x, x)(x, x), x + x)


# ---- modules and functions as Python objects ------------------------------------------------------------
def test_a_module_is_not_iterable_and_lists_each_function_once_in_dir(mod):
    """`for name in mod` was a KeyError "module has no function `0`" (Python iterated by index through
    `__getitem__`); `dir(mod)` listed each function twice."""
    with pytest.raises(TypeError, match=r"an arr module is not iterable: `mod.functions` lists"):
        list(mod)
    names = dir(mod)
    assert len(names) == len(set(names)) and set(mod.functions) <= set(names)


def test_pickling_is_refused_in_words_and_copies_are_the_same_object(mod):
    """pickle said "cannot pickle '_thread.lock' object" (or 'Device', 'Module', by what the module held);
    copy.copy gave a second module whose functions belonged to the first."""
    import copy
    import pickle
    for obj, what in [(mod, "module"), (mod.add, "function")]:
        with pytest.raises(TypeError, match=rf"an arr {what} cannot be pickled: .* `arrc.loads`"):
            pickle.dumps(obj)
        assert copy.copy(obj) is obj and copy.deepcopy(obj) is obj
    assert copy.deepcopy({"f": mod.add})["f"] is mod.add


def test_inspect_signature_shows_the_parameters_and_defaults():
    """`inspect.signature(mod.f)` raised "<property object ...> is not a callable object" (`__call__` is a
    property), so tools that read a callable's parameters could not."""
    import inspect
    m = arrc.loads("def f(x: f32[n], b: f32 = 1.5, c: i32 = 2) -> f32:\n    return sum(x) * b\n")
    assert str(inspect.signature(m.f)) == "(x, b=1.5, c=2)"
    assert inspect.signature(m.f).bind([1.0], c=3).arguments == {"x": [1.0], "c": 3}
    assert str(inspect.signature(arrc.grad(m.f))) == "(x, b=1.5, c=2)"


@pytest.mark.parametrize("guards", [None, "all"])
def test_changing_a_numpy_argument_after_the_call_leaves_its_result_alone(guards):
    """A NumPy argument is copied to the device: jaxlib shared the memory of a large one on the CPU device
    (jax-ml/jax#37830), the program ran after the call returned, and `x[:] = 0` right after `r = f(x)` gave
    results of 0, 6 or anything between instead of 100 (first calls, dispatched calls and 64-bit arrays alike)."""
    m = arrc.loads("def total(x: f32[n], steps: i32) -> f32[n]:\n    acc = zeros_like(x)\n"
                   "    for i in range(steps):\n        acc = acc + x\n    return acc\n\n"
                   "def total64(x: f64[n], steps: i32) -> f64[n]:\n    acc = zeros_like(x)\n"
                   "    for i in range(steps):\n        acc = acc + x\n    return acc\n", guards=guards)
    for fn, dtype in [(m.total, np.float32), (m.total64, np.float64)]:
        for _ in range(4):
            x = np.ones(1 << 20, dtype)     # (large: its memory is page-aligned, which jaxlib shared)
            r = fn(x, 50)
            x[:] = 0
            assert np.all(np.asarray(r) == 50)


def test_an_expression_or_as_text_option_of_another_kind():
    """`mod.expression(b"K")` (or None, 3) said "an expression given as its AST needs the source it was parsed
    from"; `as_text(debug_info="yes")` was nanobind's "get_asm(): incompatible function arguments"."""
    m = arrc.loads("const K: i32 = 3\n\ndef f(x: f32) -> f32:\n    return exp(x)\n")
    for expr, what in [(b"K", r"bytes; for bytes, mod\.expression\(data\.decode\(\)\)"), (None, "NoneType"), (3, "int")]:
        with pytest.raises(TypeError, match=rf"expression takes an arr expression's text \(a str\), not {what}"):
            m.expression(expr)
    assert m.expression("K * 2")() == 6
    lowered = m.f.lower(1.0)
    assert lowered.as_text(debug_info="yes") == lowered.as_text(debug_info=True) != lowered.as_text()
