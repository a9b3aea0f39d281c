"""What the faster check and lowering walks must keep: the exact StableHLO text and locations, dtype
identity, MLIR types of the right context, and the recursion limit (raised for inlined calls only)."""
from __future__ import annotations

import copy
import pickle
import sys
import threading

import pytest
from conftest import call_chain

import arrc
from arrc.compiler.types import DTYPES, ArrayType, Dim

F32_3 = "f32[3]"

# Statements of the front-end benchmark (bench/programs.py `generated`): a literal's constant and its
# (one splat constant of the operand's shape) takes the location of the operation that uses the literal; names and literals have none.
GENERATED = """\
def main(x: f32[64], y: f32[64]) -> f32[64]:
    t0 = x * 1.000001 + y
    t1 = cos(t0) * x + y - 0.776
    return t1
"""
GENERATED_TEXT = """\
#loc2 = loc("<string>":1:13 to :20)
#loc3 = loc("<string>":1:25 to :32)
#loc12 = loc("x"(#loc2))
#loc13 = loc("y"(#loc3))
module {
  func.func public @main(%arg0: tensor<64xf32> loc("x"(#loc2)), %arg1: tensor<64xf32> loc("y"(#loc3))) -> tensor<64xf32> attributes {arrc.entry = "main"} {
    %cst = stablehlo.constant dense<1.00000095> : tensor<64xf32> loc(#loc14)
    %0 = stablehlo.multiply %arg0, %cst : tensor<64xf32> loc(#loc14)
    %1 = stablehlo.add %0, %arg1 : tensor<64xf32> loc(#loc15)
    %2 = stablehlo.cosine %1 : tensor<64xf32> loc(#loc16)
    %3 = stablehlo.multiply %2, %arg0 : tensor<64xf32> loc(#loc17)
    %4 = stablehlo.add %3, %arg1 : tensor<64xf32> loc(#loc18)
    %cst_0 = stablehlo.constant dense<7.760000e-01> : tensor<64xf32> loc(#loc19)
    %5 = stablehlo.subtract %4, %cst_0 : tensor<64xf32> loc(#loc19)
    return %5 : tensor<64xf32> loc(#loc20)
  } loc(#loc11)
} loc(#loc)
#loc = loc(unknown)
#loc1 = loc("<string>":1:5 to :9)
#loc4 = loc("<string>":2:10 to :22)
#loc5 = loc("<string>":2:10 to :26)
#loc6 = loc("<string>":3:10 to :17)
#loc7 = loc("<string>":3:10 to :21)
#loc8 = loc("<string>":3:10 to :25)
#loc9 = loc("<string>":3:10 to :33)
#loc10 = loc("<string>":4:5 to :14)
#loc11 = loc("main"(#loc1))
#loc14 = loc("multiply"(#loc4))
#loc15 = loc("add"(#loc5))
#loc16 = loc("cos"(#loc6))
#loc17 = loc("multiply"(#loc7))
#loc18 = loc("add"(#loc8))
#loc19 = loc("subtract"(#loc9))
#loc20 = loc("return"(#loc10))
"""


def test_generated_statements_lower_to_the_same_text():
    mod = arrc.loads(GENERATED)
    text = mod.main.lower(arrc.spec("f32[64]"), arrc.spec("f32[64]")).as_text(debug_info=True)
    assert text == GENERATED_TEXT


def test_module_constant_takes_the_location_of_its_use():
    mod = arrc.loads("const K: f32 = 2.5\n\ndef f(x: f32[n]) -> f32[n]:\n    return x * K\n")
    text = mod.f.lower(arrc.spec(F32_3)).as_text(debug_info=True)
    [const_line] = [line for line in text.splitlines() if "stablehlo.constant" in line]
    loc = const_line.rsplit("loc(", 1)[1].rstrip(")")
    assert f'{loc} = loc("name"(' in text, text


def test_inlined_ops_carry_call_site_locations():
    mod = arrc.loads("def g(x: f32[n]) -> f32[n]:\n    return exp(x)\n\n"
                     "def f(x: f32[n]) -> f32[n]:\n    return g(x) + 1.0\n")
    text = mod.f.lower(arrc.spec(F32_3)).as_text(debug_info=True)
    assert 'callsite(' in text and 'loc("g"(' in text and 'loc("exp"(' in text, text


def test_dtypes_are_one_instance_each():
    t = ArrayType(DTYPES["f32"], (Dim.const(3),))
    assert copy.copy(DTYPES["f64"]) is DTYPES["f64"]
    assert copy.deepcopy(t) == t and pickle.loads(pickle.dumps(t)) == t
    assert pickle.loads(pickle.dumps(DTYPES["bf16"])) is DTYPES["bf16"]


def test_types_of_one_context_never_reach_another():
    """emit caches MLIR types for the context in use: lowerings in turns, and in threads, stay valid."""
    mod = arrc.loads("def f(x: f32[n], y: i32[n]) -> f32[n]:\n    return x * 2.0 + y\n")
    first = [mod.f.lower(arrc.spec(f"f32[{n}]"), arrc.spec(f"i32[{n}]")) for n in (2, 3, 2)]
    texts = [low.as_text() for low in first]
    assert texts[0] == texts[2] != texts[1]
    errors = []

    def lower_many(n):
        try:
            for _ in range(20):
                low = mod.f.lower(arrc.spec(f"f32[{n}]"), arrc.spec(f"i32[{n}]"))
                with low.context:
                    low.module.operation.verify()
                assert f"tensor<{n}xf32>" in low.as_text()
        except Exception as err:        # noqa: BLE001  (reported below)
            errors.append(err)
    threads = [threading.Thread(target=lower_many, args=(n,)) for n in (4, 5, 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_recursion_limit_is_restored_after_inlining():
    limit = sys.getrecursionlimit()
    mod = arrc.loads(call_chain(150))
    mod.f150.lower(arrc.spec(F32_3))
    assert sys.getrecursionlimit() == limit
    too_large = arrc.loads(call_chain(150).replace("return x + 1.0", "return sum(outer(x, x), axis=0)"))
    with pytest.raises(arrc.CompileError, match="E0215"):         # found in the innermost call
        too_large.f150.lower(arrc.spec("f32[1000000]"))
    assert sys.getrecursionlimit() == limit


def test_deep_expression_inside_a_deepcall_chain():
    """An inlined function may nest expressions as deep as the check allowed it on its own."""
    body = "+".join(["x"] * 300)
    src = f"def f0(x: f32[n]) -> f32[n]:\n    return {body}\n"
    for k in range(1, 120):
        src += f"def f{k}(x: f32[n]) -> f32[n]:\n    return f{k - 1}(x) * 2.0\n"
    mod = arrc.loads(src)
    assert "stablehlo" in mod.f119.lower(arrc.spec(F32_3)).as_text()
