"""The one pipeline (runtime/pipeline.py, issue 14): its pass list, its verification after each pass, and the
stops of `arrc compile --emit ast|stablehlo|guarded|hlo` and `--passes`."""
from __future__ import annotations

import pytest
from jaxlib.mlir import ir

import arrc
from arrc.cli import main as cli
from arrc.passes.base import ModulePass
from arrc.passes.guards import GuardOptions
from arrc.passes.registry import run_passes
from arrc.runtime.pipeline import parse_pass_list, passes_for
from conftest import filecheck

SRC = "def main(x: f32[3], i: i32) -> f32:\n    return x[i] / 2.0\n"


AST_GOLDEN = """\
Module @1:1-3:1
  items:
    FunctionDef @1:1-3:1
      name: 'main'
      params:
        Param @1:10-1:19
          name: 'x'
          type:
            TypeExpr @1:13-1:19
              dtype: 'f32'
              dims:
                DimInt @1:17-1:18
                  value: 3
        Param @1:21-1:27
          name: 'i'
          type:
            TypeExpr @1:24-1:27
              dtype: 'i32'
              dims: None
      results:
        TypeExpr @1:32-1:35
          dtype: 'f32'
          dims: None
      tuple_result: False
      body:
        Return @2:5-2:22
          values:
            Binary @2:12-2:22
              op: '/'
              lhs:
                Index @2:12-2:16
                  base:
                    Name @2:12-2:13
                      id: 'x'
                  subscripts:
                    Name @2:14-2:15
                      id: 'i'
              rhs:
                FloatLit @2:19-2:22
                  value: 2.0
      name_span: @1:5-1:9
      label: ''
      extern: False
"""


@pytest.fixture()
def program(tmp_path):
    path = tmp_path / "p.arr"
    path.write_text(SRC)
    return path


def _compile(capsys, *argv) -> tuple[int, str, str]:
    code = cli(["compile", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_pass_list_of_an_arr_function():
    assert [p.name for p in passes_for()] == ["verify-static-shapes"]
    assert [p.name for p in passes_for(GuardOptions(frozenset({"nan"})))] == ["verify-static-shapes", "guard"]
    chosen = parse_pass_list("guard,verify-static-shapes", GuardOptions(frozenset({"bounds"})))
    assert [p.name for p in chosen] == ["guard", "verify-static-shapes"]
    assert chosen[0].options.kinds == {"bounds"}
    with pytest.raises(ValueError, match="unknown pass `inline`"):
        parse_pass_list("inline")


def test_emit_ast_is_the_checked_tree(capsys, program):
    code, out, err = _compile(capsys, program, "--emit", "ast")
    assert (code, err) == (0, "")
    assert out == AST_GOLDEN


def test_emit_guarded_has_every_guard_and_stablehlo_only_those_asked(capsys, program):
    _, plain, _ = _compile(capsys, program)
    _, guarded, _ = _compile(capsys, program, "--emit", "guarded")
    _, bounds, _ = _compile(capsys, program, "--emit", "guarded", "--guards", "bounds")
    assert "stablehlo.custom_call" not in plain
    assert 'arrc.kind = "bounds"' in guarded and "arrc.guards = " in guarded
    assert 'arrc.guards = "bounds"' in bounds and 'arrc.guards = "bounds,' not in bounds


def test_passes_replaces_the_list(capsys, program):
    _, out, _ = _compile(capsys, program, "--guards", "all", "--passes", "verify-static-shapes")
    assert "arrc.guards" not in out
    code, out, err = _compile(capsys, program, "--passes", "guard,fold")
    assert (code, out) == (2, "")
    assert err == ("arrc: error: --passes: unknown pass `fold` "
                   "(passes: clamp-update-starts, guard, lower-linalg, report-past, speculate-small-ifs, "
                   "splittable-reductions, unroll-short-loops, value-and-grad, verify-backend, "
                   "verify-foreign-calls, verify-static-shapes)\n")


def test_emit_hlo_is_what_xla_compiled(capsys, program):
    code, out, _ = _compile(capsys, program, "--emit", "hlo")
    assert code == 0 and out.startswith("HloModule main")
    code, out, err = _compile(capsys, program, "--emit", "hlo", "--target", "gpu")
    assert (code, out) == (2, "") and "--emit hlo compiles for this machine" in err


class _Breaks(ModulePass):
    """A pass with a bug: it leaves a function whose result type no longer matches its return."""
    name = "breaks"

    def apply(self, module):
        fop = module.body.operations[0]
        with module.context:
            fop.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get([], []))
        return []


def test_a_pass_that_leaves_an_invalid_module_is_an_internal_error():
    lowered = arrc.loads(SRC).main.lower(arrc.spec("f32[3]"), arrc.spec("i32"))
    with lowered.context:
        diags = run_passes(lowered.module, [_Breaks(), *passes_for()])
    assert [d.code for d in diags] == ["E0601"]
    assert diags[0].message.startswith("internal compiler error: RuntimeError: pass `breaks` left an invalid module")


def test_a_short_loop_is_unrolled_as_jax_traces_a_python_loop(tmp_path, capsys):
    """`for` loops of at most 8 iterations with small bodies become copies of their bodies before XLA (which
    fuses across copies, never across iterations); longer ones stay loops. Same numbers, and a guard report
    inside an unrolled loop still names its iteration."""
    import numpy as np
    src = ("def short(x: f32[64]) -> f32[64]:\n    for i in range(8):\n        x = x * 1.5 + 0.5\n    return x\n\n"
           "def long(x: f32[64]) -> f32[64]:\n    for i in range(9):\n        x = x * 1.5 + 0.5\n    return x\n\n"
           "def logs(x: f32[4]) -> f32[4]:\n    for i in range(4):\n        x = log(x - 0.5 * i)\n    return x\n")
    (tmp_path / "u.arr").write_text(src)
    for entry, loops in (("short", False), ("long", True)):
        code, out, _ = _compile(capsys, tmp_path / "u.arr", "--entry", entry, "--emit", "hlo")
        assert code == 0 and (" while(" in out) == loops, out
    mod = arrc.loads(src, guards="nan")
    x = np.linspace(1, 2, 64, dtype=np.float32)
    expected = x.copy()
    for _ in range(8):
        expected = expected * np.float32(1.5) + np.float32(0.5)
    np.testing.assert_allclose(mod.short(x), expected, rtol=1e-6)
    with pytest.raises(arrc.NaNError) as info:
        mod.logs(np.full(4, 3.0, np.float32))
    assert "in loop iteration 2" in str(info.value), str(info.value)


def test_short_loops_are_unrolled_in_a_walk_a_nesting_level(monkeypatch):
    """The pass walked the whole module again for each loop it unrolled (a helper with a 4-step loop called
    200 times: 200 walks, quadratic); it now unrolls every short loop that holds no other in one walk, a
    nesting level a round. Nested short loops still unroll innermost first (the outer one's body then
    counted with its copies), and the numbers stay those of the loops."""
    import numpy as np
    from arrc.passes import unroll
    walks = []
    ops_named = unroll.ops_named
    monkeypatch.setattr(unroll, "ops_named", lambda *a: walks.append(a) or ops_named(*a))
    src = ("def g(x: f32[4]) -> f32[4]:\n    for i in range(4):\n        x = x * 0.5 + 0.5\n    return x\n\n"
           "def nested(x: f32[4]) -> f32[4]:\n    for i in range(3):\n        for j in range(2):\n"
           "            x = x * 0.5 + f32(j)\n    return x\n\n"
           "def f(x: f32[4]) -> f32[4]:\n" + "    x = g(x)\n" * 60 + "    return nested(x)\n")
    x = np.linspace(1, 2, 4, dtype=np.float32)
    got = arrc.loads(src).f(x)
    assert len(walks) == 3          # the inner loops, the nested one's outer loop, and none left
    expected = x.copy()
    for _ in range(60 * 4):
        expected = expected * np.float32(0.5) + np.float32(0.5)
    for _ in range(3):
        for j in range(2):
            expected = expected * np.float32(0.5) + np.float32(j)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


CENTROID = """
def update(x: f32[8, 2], labels: i32[8], c: f32[3, 2], j: i32) -> f32[3, 2]:
    new = c
    member = expand_dims(labels == j, 1)
    count = sum(where(member, 1.0, 0.0))
    if count > 0.0:
        new[j, :] = sum(where(member, x, 0.0), axis=0) / count
    return new
"""


def test_a_small_pure_branch_is_speculated_as_a_jax_user_writes_where():
    """examples/kmeans.arr's centroid update: both sides computed and a select, not a `stablehlo.if` (an
    XLA:CPU conditional, across which nothing fuses: k-means ran 1.06 of jax.jit, issue 18). The side not
    taken divides by a count of 0; its NaN is never picked."""
    import numpy as np
    from arrc.passes.speculate import SpeculateSmallIfs
    fn = arrc.loads(CENTROID).update
    lowered = fn.lower(arrc.spec("f32[8, 2]"), arrc.spec("i32[8]"), arrc.spec("f32[3, 2]"), arrc.spec("i32"))
    with lowered.context:
        assert run_passes(lowered.module, [SpeculateSmallIfs()]) == []
    filecheck(lowered.as_text(), """
        CHECK-NOT: stablehlo.if
        CHECK: [[COUNT:%[0-9]+]] = stablehlo.reduce({{.*}}) -> tensor<f32>
        CHECK: [[TAKEN:%[0-9]+]] = stablehlo.compare GT, [[COUNT]]
        CHECK: [[NEW:%[0-9]+]] = stablehlo.dynamic_update_slice %arg2
        CHECK: [[PICKED:%[0-9]+]] = stablehlo.select [[TAKEN]], [[NEW]], %arg2 : tensor<i1>, tensor<3x2xf32>
        CHECK: return [[PICKED]]
    """)
    x = np.arange(16, dtype=np.float32).reshape(8, 2)
    labels = np.array([0, 0, 1, 1, 1, 0, 0, 1], np.int32)
    c = np.full((3, 2), 7.0, np.float32)
    np.testing.assert_array_equal(fn(x, labels, c, 1), [[7, 7], [8, 9], [7, 7]])
    np.testing.assert_array_equal(fn(x, labels, c, 2), c)         # no member: the NaN side not picked


def test_a_branch_with_effects_or_much_work_stays_a_branch(tmp_path, capsys):
    """A side not taken must not print or check (a guard's report calls the host), and one of much work would
    cost it when not taken: those stay conditionals."""
    import numpy as np
    src = (CENTROID + "\ndef prints(x: f32[4], t: f32) -> f32[4]:\n    if x[0] > t:\n        print(\"taken\")\n"
           "        x = x * 2.0\n    return x\n"
           "\ndef large(x: f32[65536], t: f32) -> f32[65536]:\n    if x[0] > t:\n        x = x * 2.0\n    return x\n"
           "\ndef divides(x: i32[4], d: i32) -> i32[4]:\n    if d != 0:\n        x = x // d\n    return x\n")
    (tmp_path / "b.arr").write_text(src)
    for entry, branches in (("update", False), ("prints", True), ("large", True)):
        code, out, _ = _compile(capsys, tmp_path / "b.arr", "--entry", entry, "--emit", "hlo")
        assert code == 0 and (" conditional(" in out) == branches, out
    mod = arrc.loads(src, guards="div0")
    np.testing.assert_array_equal(mod.prints(np.ones(4, np.float32), 2.0), np.ones(4))
    assert "taken" not in capsys.readouterr().out
    np.testing.assert_array_equal(mod.divides(np.arange(4, dtype=np.int32), 0), np.arange(4))


def test_the_api_s_entry_takes_keys_as_their_words():
    """`keys-as-words` (the API's compiles): main takes each key parameter as u32 words [..., 2], hidden
    arguments (a print's run id and io token) left where they are and not counted, and calls arr's own main, kept
    private, with the words packed (the first word high, compiler/types.py KEY); its attributes (the
    hidden arguments' positions) are the new main's."""
    from arrc.passes.key_words import KeysAsWords
    src = "def f(x: f32[2], ks: key[3]) -> f32[2]:\n    print(\"x\", x)\n    return x + uniform(ks[1], (2,))\n"
    lowered = arrc.loads(src).f.lower(arrc.spec("f32[2]"), arrc.spec("key[3]"))
    with lowered.context:
        assert run_passes(lowered.module, [KeysAsWords((1,))]) == []
    filecheck(lowered.as_text(), """
        CHECK: func.func private @arrc.packed_keys_main(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<2xf32>, %arg3: tensor<3xui64>)
        CHECK: func.func @main(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<2xf32>, %arg3: tensor<3x2xui32>)
        CHECK-SAME: arrc.io_arg = 1 : i64, arrc.run_arg = 0 : i64
        CHECK: stablehlo.slice %arg3 [0:3, 0:1]
        CHECK: stablehlo.slice %arg3 [0:3, 1:2]
        CHECK: stablehlo.shift_left
        CHECK: [[R:%[0-9]+]]:2 = call @arrc.packed_keys_main(%arg0, %arg1, %arg2, {{%[0-9]+}})
        CHECK: return [[R]]#0, [[R]]#1
    """)
