"""Unit tests of the guard passes (passes/guards.py, passes/rewrite.py) and `verify-static-shapes` on small
hand-written StableHLO modules: FileCheck-style assertions on the instrumented text, and the report sites the
runtime reads back from it (runtime/guards.py `sites`). Nothing here compiles or runs a module."""
from __future__ import annotations

import re

import pytest
from conftest import filecheck
from jaxlib.mlir import ir

from arrc.compiler import emit
from arrc.passes.guards import KINDS, GuardOptions, guard_module, parse_kinds, results_check, results_filter
from arrc.passes.registry import PASSES, run_passes
from arrc.passes.rewrite import entry
from arrc.runtime.guards import sites

CB = "xla_ffi_python_cpu_callback"
V = "[[{}:%[A-Za-z0-9_#]+]]"          # capture of an SSA value


def parse(text: str):
    ctx = emit.make_context()
    with ctx:
        module = ir.Module.parse(text)
    return ctx, module


def guarded(text: str, kinds, scope: str = "results", origins: bool = False):
    """(instrumented text, module, context, diagnostics) for `text` guarded with `kinds`."""
    ctx, module = parse(text)
    diags = guard_module(module, GuardOptions(parse_kinds(kinds), scope, origins))
    with ctx:
        module.operation.verify()
        return module.operation.get_asm(enable_debug_info=False), module, ctx, diags


def kinds_of(text: str) -> list[str]:
    return re.findall(r'arrc\.kind = "(\w+)"', text)


def site_ops(text: str) -> list[str]:
    return re.findall(r'arrc\.op = "([\w.]+)"', text)


DIV_F32 = """
func.func public @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.divide %x, %y : tensor<4xf32>
  %1 = stablehlo.multiply %0, %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""

DIV_I32 = """
func.func public @main(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi32> {
  %0 = stablehlo.divide %a, %b : tensor<4xi32>
  %1 = stablehlo.remainder %a, %b : tensor<4xi32>
  %2 = stablehlo.add %0, %1 : tensor<4xi32>
  return %2 : tensor<4xi32>
}
"""

DSLICE = """
func.func public @main(%x: tensor<8xf32>, %i: tensor<i32>) -> tensor<2xf32> {
  %0 = stablehlo.dynamic_slice %x, %i, sizes = [2] : (tensor<8xf32>, tensor<i32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""

DUS = """
func.func public @main(%x: tensor<8xf32>, %u: tensor<3xf32>, %i: tensor<i32>) -> tensor<8xf32> {
  %0 = stablehlo.dynamic_update_slice %x, %u, %i : (tensor<8xf32>, tensor<3xf32>, tensor<i32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""

GATHER = """
func.func public @main(%x: tensor<8xf32>, %idx: tensor<3xi32>) -> tensor<3xf32> {
  %0 = "stablehlo.gather"(%x, %idx) {dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0],
        start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1>}
       : (tensor<8xf32>, tensor<3xi32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
"""

# what jax.jit(lambda x, i: x[i]) writes: an explicit index vector dimension of size 1
GATHER_JAX = GATHER.replace("tensor<3xi32>", "tensor<3x1xi32>")

LOOP = """
func.func public @main(%x: tensor<4xf32>, %k: tensor<i32>) -> tensor<4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %acc = %x) : tensor<i32>, tensor<4xf32>
   cond {
    %p = stablehlo.compare LT, %i, %k : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %n = stablehlo.add %i, %c1 : tensor<i32>
    %q = stablehlo.divide %n, %i : tensor<i32>
    %s = stablehlo.sqrt %acc : tensor<4xf32>
    stablehlo.return %q, %s : tensor<i32>, tensor<4xf32>
  }
  return %r#1 : tensor<4xf32>
}
"""

NESTED = """
func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %acc = %x) : tensor<i32>, tensor<4xf32>
   cond {
    %p = stablehlo.compare LT, %i, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %in:2 = stablehlo.while(%j = %c0, %a2 = %acc) : tensor<i32>, tensor<4xf32>
     cond {
      %p2 = stablehlo.compare LT, %j, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p2 : tensor<i1>
    } do {
      %j1 = stablehlo.add %j, %c1 : tensor<i32>
      %l = stablehlo.log %a2 : tensor<4xf32>
      stablehlo.return %j1, %l : tensor<i32>, tensor<4xf32>
    }
    %n = stablehlo.add %i, %c1 : tensor<i32>
    stablehlo.return %n, %in#1 : tensor<i32>, tensor<4xf32>
  }
  return %r#1 : tensor<4xf32>
}
"""

BRANCH = """
func.func public @main(%x: tensor<4xf32>, %a: tensor<i32>, %b: tensor<i32>, %c: tensor<i1>) -> (tensor<4xf32>, tensor<i32>) {
  %r:2 = "stablehlo.if"(%c) ({
    %s = stablehlo.sqrt %x : tensor<4xf32>
    %d = stablehlo.divide %a, %b : tensor<i32>
    stablehlo.return %s, %d : tensor<4xf32>, tensor<i32>
  }, {
    %l = stablehlo.log %x : tensor<4xf32>
    stablehlo.return %l, %a : tensor<4xf32>, tensor<i32>
  }) : (tensor<i1>) -> (tensor<4xf32>, tensor<i32>)
  return %r#0, %r#1 : tensor<4xf32>, tensor<i32>
}
"""

CALLS = """
func.func private @helper(%v: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.log %v : tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = stablehlo.negate %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""

LOCATED = """
#a = loc("model.py":3:4 to :9)
#d = loc("model.py":4:8 to :15)
func.func public @main(%x: tensor<4xf32> loc("x"), %y: tensor<4xf32> loc("y")) -> tensor<4xf32> {
  %0 = stablehlo.add %x, %y : tensor<4xf32> loc("jit(f)/add"(#a))
  %1 = stablehlo.divide %0, %y : tensor<4xf32> loc("jit(f)/div"(#d))
  return %1 : tensor<4xf32>
}
"""


# ---- parse_kinds and options ---------------------------------------------------------------------------------
def test_parse_kinds():
    assert parse_kinds("all") == frozenset(KINDS) == frozenset({"nan", "inf", "bounds", "div0"})
    assert parse_kinds("nan, inf") == frozenset({"nan", "inf"})
    assert parse_kinds(["bounds", "div0"]) == frozenset({"bounds", "div0"})
    assert parse_kinds("nan,all") == frozenset(KINDS)
    for off in (None, "", "off", "none"):
        assert parse_kinds(off) == frozenset()
    with pytest.raises(ValueError, match="nans"):
        parse_kinds("nans")
    assert GuardOptions(parse_kinds("all")).floats == frozenset({"nan", "inf"})
    assert GuardOptions(parse_kinds("bounds")).floats == frozenset()


def test_no_kinds_leaves_module_unchanged():
    ctx, module = parse(DIV_F32)
    with ctx:
        before = str(module)
    assert guard_module(module, GuardOptions()) == []
    with ctx:
        assert str(module) == before


# ---- the fast build: nan/inf on the results only -------------------------------------------------------------
def test_fast_build_leaves_the_computation_as_it_is():
    """nan/inf in the results scope: main only gains attributes, so XLA compiles exactly the unguarded
    computation (its numbers cannot change); the check is a second module (`results_check`)."""
    ctx, module = parse(DIV_F32)
    with ctx:
        before = module.operation.get_asm(enable_debug_info=False)
    text, *_ = guarded(DIV_F32, "nan")
    assert text == before.replace("func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {",
                                  'func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> '
                                  'attributes {arrc.check_results = "nan", arrc.guards = "nan"} {')
    assert kinds_of(text) == [] and "arrc.run_arg" not in text


def results_check_text(text: str, kinds: str) -> tuple[str, list]:
    _, module, ctx, _ = guarded(text, kinds)
    with ctx:
        check, checked = results_check(entry(module))
        check.operation.verify()
        return check.operation.get_asm(enable_debug_info=False), checked


def test_results_check_is_one_reduction_per_float_result():
    text, checked = results_check_text(DIV_F32, "nan")
    assert checked == [0]
    filecheck(text, f"""
        CHECK: func.func @main({V.format("R")}: tensor<4xf32>) -> tensor<i1>
        CHECK: stablehlo.compare NE, [[R]], [[R]], FLOAT
        CHECK: stablehlo.reduce
        CHECK-SAME: applies stablehlo.or
        CHECK: return
    """)


def test_results_check_nan_and_inf_use_is_finite():
    text, _ = results_check_text(DIV_F32, "nan,inf")
    filecheck(text, f"""
        CHECK: {V.format("F")} = stablehlo.is_finite %arg0
        CHECK-NEXT: stablehlo.not [[F]]
    """)


def test_results_check_inf_only_compares_abs_with_inf():
    text, _ = results_check_text(DIV_F32, "inf")
    filecheck(text, f"""
        CHECK: {V.format("A")} = stablehlo.abs %arg0
        CHECK: 0x7F800000
        CHECK: stablehlo.compare EQ, [[A]]
    """)
    assert "is_finite" not in text


def results_filter_text(text: str, platform: str) -> str:
    _, module, ctx, _ = guarded(text, "nan")
    with ctx:
        check = results_filter(entry(module), platform)
        check.operation.verify()
        return check.operation.get_asm(enable_debug_info=False)


def test_results_filter_sums_each_float_result_and_tests_the_sum():
    """The fast path's check (passes/guards.py `results_filter`): one sum, then is_finite of the sum."""
    filecheck(results_filter_text(DIV_F32, "cpu"), f"""
        CHECK: func.func @main({V.format("R")}: tensor<4xf32>) -> tensor<i1>
        CHECK: stablehlo.reduce([[R]]
        CHECK-SAME: applies stablehlo.add
        CHECK: {V.format("F")} = stablehlo.is_finite
        CHECK: stablehlo.not [[F]]
        CHECK: return
    """)


def test_results_filter_sums_a_mid_sized_result_in_a_loop_on_cpu_only():
    """On CPU a result of a few thousand elements is summed 512 at a time in a `while` (its cost counts one
    iteration, so XLA:CPU runs the check on the calling thread); other platforms sum it at once."""
    big = DIV_F32.replace("4xf32", "4096xf32")
    filecheck(results_filter_text(big, "cpu"), """
        CHECK: stablehlo.while
        CHECK: stablehlo.dynamic_slice
        CHECK-SAME: sizes = [512]
        CHECK: stablehlo.reduce
        CHECK-SAME: applies stablehlo.add
    """)
    assert "stablehlo.while" not in results_filter_text(big, "cuda")
    assert "stablehlo.while" not in results_filter_text(DIV_F32.replace("4xf32", "100000xf32"), "cpu")


def test_results_filter_sums_half_precision_in_f32():
    text = results_filter_text(DIV_F32.replace("xf32", "xf16"), "cpu")
    filecheck(text, """
        CHECK: stablehlo.convert
        CHECK-SAME: (tensor<4xf16>) -> tensor<4xf32>
        CHECK: stablehlo.reduce
    """)


def test_integer_results_get_no_result_check():
    _, module, ctx, _ = guarded(DIV_I32, "nan,inf")
    with ctx:
        assert results_check(entry(module)) == (None, [])


def test_all_ops_scope_has_no_result_check_but_instruments_ops():
    text, *_ = guarded(DIV_F32, "nan", scope="all-ops")
    assert "arrc.check_results" not in text
    assert "arrc.run_arg = 2" in text
    assert site_ops(text).count("stablehlo.divide") == 1
    assert site_ops(text).count("stablehlo.multiply") == 1
    assert kinds_of(text).count("argument") == 2


# ---- div0 ----------------------------------------------------------------------------------------------------
def test_div0_sites_are_callbacks_inside_if():
    text, *_ = guarded(DIV_I32, "div0")
    filecheck(text, f"""
        CHECK: {V.format("Q")} = stablehlo.divide %arg0, %arg1 : tensor<4xi32>
        CHECK: {V.format("BAD")} = stablehlo.compare EQ, %arg1, {{{{%[a-z0-9_]+}}}}, SIGNED
        CHECK: "stablehlo.if"
        CHECK: stablehlo.custom_call @{CB}(
        CHECK-SAME: arrc.kind = "div0"
        CHECK-SAME: arrc.labels = ["dividend"]
        CHECK-SAME: arrc.op = "stablehlo.divide"
        CHECK-SAME: arrc.shape = array<i64: 4>
        CHECK-SAME: has_side_effect = true
        CHECK: {V.format("R")} = stablehlo.remainder %arg0, %arg1 : tensor<4xi32>
        CHECK: stablehlo.compare EQ, %arg1
        CHECK: stablehlo.custom_call @{CB}(
        CHECK-SAME: arrc.kind = "div0"
        CHECK-SAME: arrc.op = "stablehlo.remainder"
        CHECK: stablehlo.add [[Q]], [[R]]
    """)
    assert kinds_of(text) == ["div0", "div0"]
    # the callback indices are distinct
    assert sorted(re.findall(r"index = (\d+) : ui64", text)) == ["0", "1"]
    # bounds/div0 only: no nan/inf result check
    assert "arrc.check_results" not in text and "arrc.run_arg" in text


def test_div0_ignores_float_division_and_safe_divisors():
    text, *_ = guarded(DIV_F32, "div0")
    assert kinds_of(text) == []
    safe = DIV_I32.replace("stablehlo.divide %a, %b : tensor<4xi32>",
                           '"stablehlo.divide"(%a, %b) {arrc.safe_divisor} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>')
    text, *_ = guarded(safe, "div0")
    assert site_ops(text) == ["stablehlo.remainder"]



def test_div0_skips_divisors_that_are_nonzero_constants():
    """`v // 2` (a literal, or its broadcast) can never divide by zero: no site."""
    literal = DIV_I32.replace("  %0 = stablehlo.divide %a, %b : tensor<4xi32>",
                              "  %two = stablehlo.constant dense<2> : tensor<4xi32>\n"
                              "  %0 = stablehlo.divide %a, %two : tensor<4xi32>")
    text, *_ = guarded(literal, "div0")
    assert site_ops(text) == ["stablehlo.remainder"]
    text, *_ = guarded(literal.replace("dense<2>", "dense<[2, 0, 1, 1]>"), "div0")
    assert site_ops(text) == ["stablehlo.divide", "stablehlo.remainder"]


def test_callback_indices_continue_after_existing_callbacks():
    existing = DIV_I32.replace(
        "%2 = stablehlo.add",
        f'stablehlo.custom_call @{CB}() {{api_version = 4 : i32, backend_config = {{index = 6 : ui64}}, '
        'has_side_effect = true} : () -> ()\n  %2 = stablehlo.add')
    text, *_ = guarded(existing, "div0")
    assert sorted(int(i) for i in re.findall(r"index = (\d+) : ui64", text)) == [6, 7, 8]


# ---- bounds --------------------------------------------------------------------------------------------------
def test_bounds_dynamic_slice():
    text, *_ = guarded(DSLICE, "bounds")
    filecheck(text, f"""
        CHECK: {V.format("S")} = stablehlo.dynamic_slice %arg0, %arg1, sizes = [2]
        CHECK: stablehlo.compare LT, %arg1
        CHECK: stablehlo.compare GT, %arg1
        CHECK: "stablehlo.if"
        CHECK: stablehlo.custom_call @{CB}(
        CHECK-SAME: arrc.dims = array<i64: 8>
        CHECK-SAME: arrc.kind = "bounds"
        CHECK-SAME: arrc.labels = ["index 0"]
        CHECK-SAME: arrc.op = "stablehlo.dynamic_slice"
        CHECK-SAME: arrc.sizes = array<i64: 2>
        CHECK: return [[S]]
    """)
    # the upper bound is dim - size = 6
    assert "dense<6> : tensor<i32>" in text


def test_bounds_dynamic_update_slice():
    text, *_ = guarded(DUS, "bounds")
    filecheck(text, f"""
        CHECK: stablehlo.dynamic_update_slice %arg0, %arg1, %arg2
        CHECK: stablehlo.compare LT, %arg2
        CHECK: stablehlo.compare GT, %arg2
        CHECK: stablehlo.custom_call @{CB}(
        CHECK-SAME: arrc.dims = array<i64: 8>
        CHECK-SAME: arrc.kind = "bounds"
        CHECK-SAME: arrc.op = "stablehlo.dynamic_update_slice"
        CHECK-SAME: arrc.sizes = array<i64: 3>
    """)
    assert "dense<5> : tensor<i32>" in text


def test_bounds_gather_checks_every_index():
    text, *_ = guarded(GATHER, "bounds")
    filecheck(text, f"""
        CHECK: "stablehlo.gather"(%arg0, %arg1)
        CHECK: stablehlo.compare LT, %arg1, {{{{%[a-z0-9_]+}}}}, SIGNED : (tensor<3xi32>, tensor<3xi32>)
        CHECK: stablehlo.compare GT, %arg1
        CHECK: "stablehlo.if"
        CHECK: stablehlo.custom_call @{CB}(
        CHECK-SAME: arrc.axis = array<i64: 0>
        CHECK-SAME: arrc.dims = array<i64: 8>
        CHECK-SAME: arrc.kind = "bounds"
        CHECK-SAME: arrc.op = "stablehlo.gather"
        CHECK-SAME: arrc.shape = array<i64: 3>
        CHECK-SAME: arrc.sizes = array<i64: 1>
    """)


def test_bounds_gather_with_index_vector_dim_as_jax_writes_it():
    text, *_ = guarded(GATHER_JAX, "bounds")
    assert kinds_of(text) == ["bounds"]


def test_bounds_leaves_elementwise_ops_alone():
    text, *_ = guarded(DIV_I32, "bounds")
    assert kinds_of(text) == []


# ---- loops, branches, calls ----------------------------------------------------------------------------------
def test_loop_gets_iteration_counter_passed_to_sites():
    text, *_ = guarded(LOOP, "div0")
    caps = filecheck(text, f"""
        CHECK: {V.format("ZERO")} = stablehlo.constant dense<0> : tensor<i64>
        CHECK: stablehlo.while({{{{.*}}}}, {V.format("CNT")} = [[ZERO]]) : tensor<i32>, tensor<4xf32>, tensor<i64>
        CHECK: stablehlo.divide
        CHECK: stablehlo.custom_call @{CB}(%arg2, {{{{%[a-z0-9_]+}}}}, [[CNT]],
        CHECK-SAME: arrc.kind = "div0"
        CHECK-SAME: arrc.order = array<i64: {{{{[0-9]+}}}}, {{{{[0-9]+}}}}>
        CHECK: {V.format("NEXT")} = stablehlo.add [[CNT]], {{{{%[a-z0-9_]+}}}} : tensor<i64>
        CHECK: stablehlo.return {{{{.*}}}}, [[NEXT]] : tensor<i32>, tensor<4xf32>, tensor<i64>
    """)
    assert caps["CNT"]
    # the loop's own results are unchanged for the rest of the function
    assert re.search(r"return %\d+#1, ", text) or re.search(r"return %\d+#1 ", text)


def test_nested_loops_give_one_counter_each():
    text, module, ctx, _ = guarded(NESTED, "nan", origins=True)
    (site,) = [s for s in _sites(module, ctx) if s.kind == "origin" and s.op == "stablehlo.log"]
    assert len(site.order) == 3                 # outer loop, inner loop, the op
    assert site.order[0] < site.order[1] < site.order[2]
    # the callback gets run id, first index, two counters, operand and result
    (line,) = [ln for ln in text.splitlines() if 'arrc.op = "stablehlo.log"' in ln]
    assert re.search(r"custom_call @\w+\(%arg1, %\w+, %\w+, %\w+, %\w+, %\w+\)", line), line
    assert len(re.findall(r"stablehlo\.while", text)) == 2


def test_no_loop_counter_without_op_sites():
    # a fast nan build instruments no operation, so its loops stay as they were
    text, *_ = guarded(LOOP, "nan")
    filecheck(text, """
        CHECK: stablehlo.while
        CHECK-SAME: : tensor<i32>, tensor<4xf32>
        CHECK-NOT: tensor<i64>
        CHECK: cond
    """)


def test_both_branches_of_if_are_instrumented():
    text, *_ = guarded(BRANCH, "nan,div0", origins=True)
    filecheck(text, f"""
        CHECK: "stablehlo.if"(%arg3)
        CHECK: stablehlo.sqrt %arg0
        CHECK: stablehlo.custom_call @{CB}(
        CHECK-SAME: arrc.kind = "origin"
        CHECK-SAME: arrc.op = "stablehlo.sqrt"
        CHECK: stablehlo.divide %arg1, %arg2 : tensor<i32>
        CHECK: stablehlo.custom_call @{CB}(
        CHECK-SAME: arrc.kind = "div0"
        CHECK: stablehlo.log %arg0
        CHECK: stablehlo.custom_call @{CB}(
        CHECK-SAME: arrc.kind = "origin"
        CHECK-SAME: arrc.op = "stablehlo.log"
    """)


def test_calls_are_inlined_before_guarding():
    text, module, ctx, diags = guarded(CALLS, "nan", origins=True)
    assert diags == []
    assert "func.call" not in text and "@helper" not in text
    ops = site_ops(text)
    assert "stablehlo.log" in ops and "stablehlo.negate" in ops


def test_calls_are_inlined_only_when_something_inside_is_checked():
    """Inlining alone can change the numbers (XLA folds a callee's constant inputs once it is inlined: 15 of
    the StableHLO testdata modules under guards="all"), so a module with nothing to check at an operation
    keeps its calls."""
    text, *_ = guarded(CALLS, "all")
    assert "call @helper(" in text and "func.func private @helper" in text
    assert kinds_of(text) == [] and "arrc.check_results" in text
    text, *_ = guarded(CALLS.replace("stablehlo.log %v : tensor<4xf32>",
                                     "stablehlo.dynamic_slice %v, %i, sizes = [4] : (tensor<4xf32>, tensor<i32>) -> tensor<4xf32>")
                       .replace("(%v: tensor<4xf32>)", "(%v: tensor<4xf32>, %i: tensor<i32>)")
                       .replace("(%x: tensor<4xf32>)", "(%x: tensor<4xf32>, %j: tensor<i32>)")
                       .replace("@helper(%x) : (tensor<4xf32>)", "@helper(%x, %j) : (tensor<4xf32>, tensor<i32>)"),
                       "bounds")
    assert "call @helper(" not in text and kinds_of(text) == ["bounds"]


def test_recursive_call_cannot_be_guarded():
    rec = """
    func.func private @r(%v: tensor<f32>) -> tensor<f32> {
      %0 = func.call @r(%v) : (tensor<f32>) -> tensor<f32>
      return %0 : tensor<f32>
    }
    func.func public @main(%x: tensor<f32>) -> tensor<f32> {
      %0 = func.call @r(%x) : (tensor<f32>) -> tensor<f32>
      return %0 : tensor<f32>
    }
    """
    ctx, module = parse(rec)
    diags = guard_module(module, GuardOptions(parse_kinds("nan"), "all-ops"))
    assert [d.code for d in diags] == ["E0502"]
    # checking only the results does not touch the computation, so it needs no inlining
    ctx, module = parse(rec)
    assert guard_module(module, GuardOptions(parse_kinds("nan"))) == []


# ---- the origin build ----------------------------------------------------------------------------------------
def test_origin_build_instruments_float_ops_and_arguments():
    text, module, ctx, _ = guarded(DIV_F32, "nan", origins=True)
    filecheck(text, f"""
        CHECK: func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>, %arg2: tensor<i32>)
        CHECK: {V.format("D")} = stablehlo.divide %arg0, %arg1
        CHECK-NEXT: {V.format("BAD")} = stablehlo.compare NE, [[D]], [[D]], FLOAT
        CHECK-NEXT: stablehlo.compare NE, %arg0, %arg0, FLOAT
        CHECK-NEXT: stablehlo.not
        CHECK-NEXT: stablehlo.and [[BAD]]
        CHECK-NEXT: stablehlo.compare NE, %arg1, %arg1, FLOAT
        CHECK: "stablehlo.if"
        CHECK: stablehlo.custom_call @{CB}(%arg2,
        CHECK-SAME: arrc.kind = "origin"
        CHECK-SAME: arrc.op = "stablehlo.divide"
        CHECK: stablehlo.multiply [[D]], [[D]]
        CHECK: stablehlo.custom_call @{CB}(%arg2,
        CHECK-SAME: arrc.kind = "origin"
        CHECK-SAME: arrc.op = "stablehlo.multiply"
        CHECK: return
    """)
    assert "arrc.check_results" not in text       # the origin build's results are not checked again
    found = _sites(module, ctx)
    assert sorted(s.attrs["arrc.arg"][0] for s in found if s.kind == "argument") == [0, 1]
    div = next(s for s in found if s.op == "stablehlo.divide")
    mul = next(s for s in found if s.op == "stablehlo.multiply")
    assert div.order < mul.order                 # execution order is recorded
    assert len(div.labels) == 3 and div.labels[-1] == "result"
    assert mul.labels[-1] == "result"
    assert all(s.order[-1] < 0 for s in found if s.kind == "argument")   # arguments come first


def test_origin_build_instruments_only_the_programs_ops():
    text, *_ = guarded(DIV_F32, "nan", origins=True)
    assert sorted(site_ops(text)) == ["func.func", "func.func", "stablehlo.divide", "stablehlo.multiply"]
    assert kinds_of(text).count("origin") == 2


def test_origin_build_skips_integer_ops():
    text, *_ = guarded(DIV_I32, "nan", origins=True)
    assert kinds_of(text) == []


def test_origin_labels_and_locations_from_foreign_module():
    text, module, ctx, _ = guarded(LOCATED, "nan", origins=True)
    by_op = {s.op: s for s in _sites(module, ctx) if s.kind == "origin"}
    div = by_op["stablehlo.divide"]
    assert div.name == "jit(f)/div"
    # JAX writes 0-based columns for .py files: the span is 1-based
    assert (div.span.file, div.span.line, div.span.col, div.span.end_col) == ("model.py", 4, 9, 16)
    # operand labels: the producing op's span, the argument's name, then the result
    assert div.labels == ["@model.py:3:5:3:10", "y", "result"]
    args = sorted((s.attrs["arrc.arg"][0], s.labels[0]) for s in _sites(module, ctx) if s.kind == "argument")
    assert args == [(0, "x"), (1, "y")]


def test_sites_read_back_from_module():
    text, module, ctx, _ = guarded(LOOP, "div0")
    (site,) = _sites(module, ctx)
    assert site.kind == "div0" and site.op == "stablehlo.divide"
    assert site.shape == () and site.labels == ["dividend"]
    assert len(site.order) == 2 and site.chain == []


def test_guarded_module_roundtrips_through_text():
    """`arrc guard` writes text; `arrc run` parses it again: the sites survive."""
    text, module, ctx, _ = guarded(GATHER, "all", origins=False)
    with ctx:
        again = ir.Module.parse(module.operation.get_asm(enable_debug_info=True))
    assert [s.kind for s in _sites(again, ctx)] == ["bounds"]


def test_guard_pass_registered():
    ctx, module = parse(DIV_I32)
    with ctx:
        assert run_passes(module, ["guard"]) == []
        text = str(module)
    assert kinds_of(text) == ["div0", "div0"]
    assert "guard" in PASSES and "verify-static-shapes" in PASSES


def _sites(module, ctx):
    with ctx:
        return list(sites(module).values())


# ---- verify-static-shapes ------------------------------------------------------------------------------------
def test_verify_static_shapes_accepts_static_module():
    ctx, module = parse(DIV_F32)
    with ctx:
        assert run_passes(module, ["verify-static-shapes"]) == []


def test_verify_static_shapes_rejects_dynamic_dimension():
    dyn = """
    #l = loc("f.py":2:4 to :9)
    func.func public @main(%x: tensor<?xf32>) -> tensor<?xf32> {
      %0 = stablehlo.add %x, %x : tensor<?xf32> loc("jit(f)/add"(#l))
      return %0 : tensor<?xf32>
    }
    """
    ctx, module = parse(dyn)
    with ctx:
        diags = run_passes(module, ["verify-static-shapes"])
    assert diags and {d.code for d in diags} == {"E0501"}
    add = [d for d in diags if "stablehlo.add" in d.message]
    assert len(add) == 1
    assert "tensor<?xf32>" in add[0].message
    span = add[0].span
    assert (span.file, span.line, span.col) == ("f.py", 2, 5)
    assert add[0].help and "static" in add[0].help


def test_verify_static_shapes_rejects_dynamic_shape_ops():
    dyn = """
    func.func public @main(%x: tensor<4xf32>) -> tensor<i32> {
      %0 = stablehlo.get_dimension_size %x, dim = 0 : (tensor<4xf32>) -> tensor<i32>
      return %0 : tensor<i32>
    }
    """
    ctx, module = parse(dyn)
    with ctx:
        diags = run_passes(module, ["verify-static-shapes"])
    assert [d.code for d in diags] == ["E0501"]
    assert "get_dimension_size" in diags[0].message and "run time" in diags[0].message


def test_a_loop_whose_indexing_is_in_range_by_construction_gets_no_iteration_counter():
    """`y[i]` for `i` in `range(1, n)`: nothing inside is checked, so the loop stays as it was (a counter
    only serves reports from inside it)."""
    import numpy as np

    import arrc
    mod = arrc.loads("def ewma(x: f32[n], a: f32) -> f32[n]:\n    y = x\n    for i in range(1, n):\n"
                     "        y[i] = a * x[i] + (1.0 - a) * y[i - 1]\n    return y\n", guards="all")
    text = mod.ewma.lower(np.ones(8, np.float32), np.float32(0.5), guarded=True).as_text()
    assert "stablehlo.while" in text and "arrc.counted" not in text and "custom_call" not in text
