"""The one ladder from source to executable, used by the API, the CLI, the REPL and foreign modules:

    source -> AST (compiler/parse.py) -> checked program (compiler/program.py)
           -> StableHLO (compiler/lower.py) -> passes (passes/registry.py) -> executable (runtime/call.py)

`passes_for` is the pass list of a module: the place where a transformation of the program (autodiff,
batching, sharding) goes in, as one more entry. `run_passes` verifies the module after each pass.
"""
from __future__ import annotations

from ..compiler.diagnostics import CompileError
from ..passes.base import ModulePass
from ..passes.guards import GuardOptions, GuardPass
from ..passes.key_words import KeysAsWords
from ..passes.lapack_calls import initialize_lapack, is_lapack_target
from ..passes.linalg import LowerLinalg
from ..passes.registry import PASSES, run_passes
from ..passes.rewrite import attr_text, ops_named
from ..passes.speculate import SpeculateSmallIfs
from ..passes.unroll import UnrollShortLoops
from ..passes.verify_backend import VerifyBackend
from ..passes.verify_foreign import VerifyForeignCalls
from ..passes.verify_static_shapes import VerifyStaticShapes

STOPS = ("ast", "stablehlo", "guarded", "hlo")    # where `arrc compile --emit` can stop


def passes_for(guards: GuardOptions | None = None) -> list[ModulePass]:
    """The passes an arr function's module goes through before it is compiled."""
    passes: list[ModulePass] = [VerifyStaticShapes()]
    if guards is not None and guards.kinds:
        passes.append(GuardPass(guards))
    return passes


def foreign_checks() -> list[ModulePass]:
    """What a module from elsewhere passes when it is read, before it is guarded or compiled."""
    return [VerifyStaticShapes(), VerifyForeignCalls()]


def parse_pass_list(text: str, guards: GuardOptions | None = None) -> list[ModulePass]:
    """`--passes a,b,c`: the named passes in that order (`guard` with the command's guard options)."""
    chosen = []
    for name in (n.strip() for n in text.split(",") if n.strip()):
        if name not in PASSES:
            raise ValueError(f"unknown pass `{name}` (passes: {', '.join(sorted(PASSES))})")
        chosen.append(GuardPass(guards) if name == GuardPass.name and guards is not None else PASSES[name]())
    return chosen


def apply_passes(module, context, passes: list, sources) -> None:
    """Run `passes` on `module` in place; their diagnostics become a CompileError."""
    with context:
        diags = run_passes(module, passes)
    if diags:
        raise CompileError(diags, sources)


def around(passes: list, target: str, mesh: tuple = ()) -> list:
    """`passes` with what every compile runs around them for PJRT platform `target`: externs' calls made JAX's
    ops first, so that the guard pass's reports look inside them; the check of what `target` runs, the other
    linear-algebra placeholders (and `shard`, over `mesh`) made JAX's lowerings, short loops unrolled and
    small branches speculated, last."""
    lane_loops = any(isinstance(p, GuardPass) for p in passes)
    return [LowerLinalg(target, externs_only=True, lane_loops=lane_loops)] + list(passes) \
        + [VerifyBackend(target), LowerLinalg(target, mesh=mesh), UnrollShortLoops(), SpeculateSmallIfs()]


def compile_module(module, context, sources, passes: list, platform: str = "cpu", key_words: tuple = ()):
    """`module` through `passes` and the check of what the device's PJRT platform can run
    (passes/verify_backend.py), then compiled for `platform` (runtime/call.py `Compiled`); its parameters
    `key_words` (hidden ones not counted) then take keys as JAX's key data (passes/key_words.py)."""
    from .call import Compiled
    from .pjrt import backend
    target = backend(platform).platform
    apply_passes(module, context, around(passes, target) + ([KeysAsWords(key_words)] if key_words else []), sources)
    if target == "cpu" and uses_lapack(module):
        initialize_lapack()
    return Compiled(module, context, sources, platform=platform)


def uses_lapack(module) -> bool:
    return any(is_lapack_target(attr_text(op.attributes["call_target_name"]))
               for op in ops_named(module, "stablehlo.custom_call"))


def compile_lowered(lowered, sources, guards: GuardOptions | None, platform: str = "cpu", key_words: tuple = ()):
    """An arr function's lowering (compiler/lower.py `Lowered`) through its passes to an executable."""
    return compile_module(lowered.module, lowered.context, sources, passes_for(guards), platform, key_words)
