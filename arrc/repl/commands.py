"""The REPL's meta-commands (`:help`, `:type`, `:mlir`, ...): each is one entry of COMMANDS."""
from __future__ import annotations

import os
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from arrc.api import DEVICES
from arrc.compiler.abi import GUARD_KINDS as KINDS
from arrc.compiler.diagnostics import CompileError
from arrc.compiler.parse import decode
from arrc.compiler.span import Source

from .display import format_seconds
from .help import help_text, suggestion, type_text
from .items import CellError, StaticValue, usage_error

if TYPE_CHECKING:
    from .session import Session

GUARD_KINDS = (*KINDS, "all")


@dataclass(frozen=True)
class Command:
    argument: str                # what it takes, for :help ("" for nothing)
    help: str
    run: Callable                # run(session, arg, arg_source): `arg_source` is the cell with only `arg` left
    optional: bool = False       # the argument may be left out


COMMAND = re.compile(r"\s*:[ \t]*([^ \t]*)[ \t]*")     # `: help x` is `:help x`


def run_command(session: Session, source: Source) -> None:
    typed = COMMAND.match(source.text)
    name, arg = ALIASES.get(":" + typed[1], ":" + typed[1]), source.text[typed.end():].strip()
    command = COMMANDS.get(name)
    if command is None:
        near = [c for c in COMMANDS if c.startswith(name[:2])]
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        raise usage_error(f"unknown command `{name}`{hint}; `:help` lists the commands")
    if command.argument and not arg and not command.optional:
        raise usage_error(f"`{name}` needs an argument: {name} {command.argument}")
    if arg and not command.argument:
        raise usage_error(f"`{name}` takes no argument (`{arg}` is left over)")
    # The argument where it was written: the command blanked out, so that its columns are the cell's.
    offset = typed.end() if arg else 0
    command.run(session, arg, Source(source.name, " " * offset + source.text[offset:]))


def argument_expression(session: Session, arg_source: Source):
    """The function of no arguments computing a command's argument (uncached: inspecting it compiles afresh)."""
    first = arg_source.text.split()[0].split("(")[0] if arg_source.text.split() else ""
    if first in ("print", "assert", "pass", "return"):     # (a statement: it would be parsed as a bad name)
        raise usage_error(f"`{first}` is a statement, not an expression: `:help {first}` tells about it")
    tree = session.parse(arg_source, "expr")
    return session.expression(tree, arg_source, cache=False)[0]


def cmd_help(session: Session, arg, arg_source) -> None:
    if arg:
        session.write(help_for(session, arg))
        return
    lines = ["Enter arr statements, expressions and definitions; an expression's value is shown with its type.",
             "A block (`def`, `for`, `if`, ...) ends with a blank line. `x = e` binds a value that functions",
             "may use like a `const`; redefining anything takes effect everywhere at once.", "",
             "Commands:"]
    for c, command in COMMANDS.items():
        lines.append(f"  {(c + ' ' + command.argument).ljust(18)} {command.help}")
    lines += ["", "`:help NAME` tells about a function, value, builtin, dtype, command or code (E0203).",
              f"guards: {session.guards or 'off'}; device: {session.device}"]
    if session.bindings:
        lines.append("values: " + ", ".join(f"{n}: {b.type}" for n, b in session.bindings.items()))
    defs = [n for n, it in session.items.items() if it.kind != "cell"]
    if defs:
        lines.append("definitions: " + ", ".join(defs))
    session.write("\n".join(lines) + "\n")


def help_for(session: Session, arg: str) -> str:
    """`:help NAME`: the session's function or value, a command, else what help.py knows of the name."""
    if arg in session.items or arg in session.bindings:
        text = session.describe_name(arg)
        item = session.items.get(arg)
        if item is not None:
            kind = "a function" if item.kind == "def" else "a constant"
            text += f"  {kind} defined at {item.where}\n"
        else:
            text += "  a value of this session\n"
        return text
    command = ALIASES.get(arg, arg) if arg.startswith(":") else ALIASES.get(":" + arg, ":" + arg)
    if command in COMMANDS and (arg.startswith(":") or help_text(arg) is None):
        c = COMMANDS[command]
        aliases = [a for a, to in ALIASES.items() if to == command]
        return f"{command} {c.argument}".rstrip() + f"\n  {c.help}" + \
            (f" (also {', '.join(aliases)})" if aliases else "") + "\n"
    text = help_text(arg)
    if text is None:
        known = list(session.items) + list(session.bindings) + list(COMMANDS)
        raise usage_error(f"nothing is called `{arg}`{suggestion(arg, known)}; `:help` lists the commands")
    return text


def cmd_type(session: Session, arg, arg_source) -> None:
    if arg.isidentifier() and (arg in session.items or arg in session.bindings):
        session.write(session.describe_name(arg))
        return
    builtin = type_text(arg) if arg.lstrip(".").isidentifier() else None
    if builtin is not None:
        session.write(builtin)
        return
    try:
        fn = argument_expression(session, arg_source)
    except StaticValue as static:
        session.write(static.type + "\n")
        return
    session.write(result_type(fn) + "\n")


def result_type(fn) -> str:
    """The type of a function's result(s) as a cell shows it: `f32[3]`, `(i32, f32)`, a tuple of one `(i32,)`."""
    sig = fn._sig
    if sig.tuple_result and len(sig.results) == 1:
        return f"({sig.results[0]},)"
    return fn.signature.split("-> ", 1)[1]


def _function_and_types(session: Session, arg, arg_source, command: str):
    """What `:mlir`/`:hlo` show: a named function with concrete parameter types, or an expression."""
    if arg.isidentifier() and arg in session.items and session.items[arg].kind == "def":
        fn = session.module({arg})[arg]
        if fn.shape_vars:
            raise usage_error(f"`{arg}{fn.signature}` is generic over {', '.join(fn.shape_vars)}: it needs "
                              f"concrete shapes; give a call instead, e.g. `{command} {arg}(...)` with "
                              f"arguments of the sizes you want")
        return fn, fn.arg_types_for({})
    return argument_expression(session, arg_source), []


def prepared(session: Session, fn, types):
    """`fn` lowered for `types` and through its passes (runtime/pipeline.py), guards as the API's."""
    from arrc.passes.guards import GuardOptions
    from arrc.runtime.pipeline import apply_passes, passes_for
    try:
        lowered = fn.lower(*types)
        options = GuardOptions(getattr(fn.module, "guard_kinds", None) or frozenset(), fn.module.guard_scope)
        apply_passes(lowered.module, lowered.context, passes_for(options), fn.sources)
    except CompileError as err:
        raise session.compile_error(err) from None
    return lowered


def cmd_mlir(session: Session, arg, arg_source) -> None:
    lowered = prepared(session, *_function_and_types(session, arg, arg_source, ":mlir"))
    session.write(lowered.as_text(debug_info=True))


def cmd_hlo(session: Session, arg, arg_source) -> None:
    from arrc.runtime.pipeline import compile_module
    from arrc.runtime.pjrt import DeviceUnavailable
    fn, types = _function_and_types(session, arg, arg_source, ":hlo")
    lowered = prepared(session, fn, types)
    try:
        compiled = compile_module(lowered.module, lowered.context, fn.sources, [], session.device)
    except DeviceUnavailable as err:
        raise usage_error(str(err)) from None
    loaded = compiled.executable.loaded
    try:
        text = loaded.hlo_modules()[0].to_string()
    except (AttributeError, IndexError):
        text = loaded.get_hlo_text()
    session.write(text if text.endswith("\n") else text + "\n")


def cmd_time(session: Session, arg, arg_source) -> None:
    from arrc.runtime.call import interruptible
    t0 = time.perf_counter()
    fn = argument_expression(session, arg_source)           # fresh: measures the whole compile
    t1 = time.perf_counter()
    session.call(fn)                                        # compile + the first run
    t2 = time.perf_counter()
    runs: list[float] = []

    def measure():      # one helper thread for all the runs (the calls inside do not hand off again)
        while len(runs) < 5 or (sum(runs) < 0.3 and len(runs) < 1000):
            start = time.perf_counter()
            session.call(fn, quiet=True)
            runs.append(time.perf_counter() - start)
    interruptible(measure)
    run = statistics.median(runs)
    compile_s = max(0.0, t2 - t1 - run)
    session.write(f"compile {format_seconds(t1 - t0 + compile_s)} (check {format_seconds(t1 - t0)}, "
                  f"lower + XLA {format_seconds(compile_s)}), run {format_seconds(run)} "
                  f"(median of {len(runs)} runs, {session.device})\n")


def cmd_guards(session: Session, arg, arg_source) -> None:
    if arg in ("off", "none"):
        session.guards = None
    elif arg:
        kinds = list(dict.fromkeys(k.strip() for k in arg.split(",") if k.strip()))     # (`nan,nan` is `nan`)
        if {"off", "none"} & set(kinds):        # (was "unknown guard `off` (choose from ..., or off)")
            raise usage_error("`off` turns every guard off: give it alone, not in a list")
        bad = [k for k in kinds if k not in GUARD_KINDS]
        if bad or not kinds:
            raise usage_error(f"unknown guard `{bad[0] if bad else arg}` (choose from {', '.join(GUARD_KINDS)}, "
                              f"or off)")
        session.guards = "all" if "all" in kinds else ",".join(kinds)
    session.write(f"guards: {session.guards or 'off'}\n")


def cmd_device(session: Session, arg, arg_source) -> None:
    from arrc.runtime.pjrt import DeviceUnavailable, backend
    if arg:
        if arg not in DEVICES:
            raise usage_error(f"unknown device `{arg}` (choose from {', '.join(DEVICES)})")
        try:
            backend(arg)
        except DeviceUnavailable as err:
            raise usage_error(f"{err}; still on {session.device}") from None
        session.device = arg
    try:
        dev = backend(session.device).local_devices()[0]
        kind = getattr(dev, "device_kind", "") or ""
    except Exception:          # a description only
        kind = ""
    session.write(f"device: {session.device}" + (f" ({kind})" if kind and kind != session.device else "") + "\n")


def cmd_load(session: Session, arg, arg_source) -> None:
    path = arg.strip("\"'")
    if not path:                # (`:load ""`: Path("") is the current directory)
        raise usage_error(f"`:load` needs a file name: :load {COMMANDS[':load'].argument}")
    load_file(session, os.path.expanduser(path))


def load_file(session: Session, path: str, reload: bool = False) -> None:
    file = Path(path)
    if not file.is_file():
        raise usage_error(f"{path} is a directory" if file.is_dir() else
                          f"{path} is not a regular file" if file.exists() else f"no such file: {path}")
    try:
        source = decode(file.read_bytes(), path)
    except CompileError as err:
        raise session.compile_error(err) from None
    except OSError as err:      # (unreadable: not an output error, which ends the session)
        raise usage_error(f"cannot read {path}: {err.strerror or err}") from None
    old = [n for n in session.loaded.get(path, []) if n in session.items and session.items[n].origin == path]
    new, warning = session.define(source, origin=path, drop=old)
    names = [it.name for it in new]
    removed = [n for n in old if n not in names]
    session.loaded[path] = names
    parts = []
    for kind, word in (("def", "function"), ("const", "constant")):
        defined = [it.name for it in new if it.kind == kind]
        if defined:
            parts.append(f"{len(defined)} {word}{'s' if len(defined) != 1 else ''} ({', '.join(defined)})")
    gone = f"; removed {', '.join(removed)}" if removed else ""
    session.write(f"{'reloaded' if reload else 'loaded'} {path}: {', '.join(parts) or 'nothing'}{gone}\n")
    session.write_diagnostics(warning)      # (what uses what changed or went, said after what changed)


def cmd_reload(session: Session, arg, arg_source) -> None:
    if not session.loaded:
        raise usage_error("nothing to reload: no file was loaded with :load")
    *others, last = session.loaded
    failed = []
    for path in others:     # each file, also after one that fails (gone, broken): the others' edits are not lost
        try:
            load_file(session, path, reload=True)
        except (CellError, CompileError) as err:
            session.failed(session.show_failure(err))
            failed.append(path)
    load_file(session, last, reload=True)
    if failed:
        raise usage_error(f"not reloaded: {', '.join(failed)} (the other files were)")


def cmd_quit(session: Session, arg, arg_source) -> None:
    session.quit = True


COMMANDS = {
    ":help": Command("NAME", "this help; with a NAME, about that name", cmd_help, optional=True),
    ":type": Command("EXPR", "the type of an expression or the signature of a function (nothing runs)", cmd_type),
    ":mlir": Command("EXPR|FN", "StableHLO of an expression or function, with source locations", cmd_mlir),
    ":hlo": Command("EXPR", "XLA's optimized HLO for an expression, on the current device", cmd_hlo),
    ":time": Command("EXPR", "compile time and run time (median of several runs)", cmd_time),
    ":guards": Command("LIST|off", "run-time guards: nan,inf,bounds,div0 or all; `off` disables them", cmd_guards,
                       optional=True),
    ":device": Command("NAME", "device to compile for and run on: cpu, gpu or tpu", cmd_device, optional=True),
    ":load": Command("FILE", "load the definitions of an .arr file", cmd_load),
    ":reload": Command("", "load again every file loaded with :load", cmd_reload),
    ":quit": Command("", "leave (also Ctrl-D)", cmd_quit),
}
ALIASES = {":q": ":quit", ":exit": ":quit", ":h": ":help", ":?": ":help", ":t": ":type"}
