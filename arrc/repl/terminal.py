"""The REPL on a terminal (prompt_toolkit: highlighting, history, completion, multi-line blocks) and
from a pipe; `main` is `arrc repl`."""
from __future__ import annotations

import argparse
import errno
import io
import os
import re
import sys
from pathlib import Path

import arrc
from arrc.api import DEVICES
from arrc.compiler.check import NAMED_CONSTANTS
from arrc.compiler.signals import keep_lost_interrupts
from arrc.compiler.types import DTYPES
from arrc.exits import EXIT_OK, EXIT_USAGE, drop_stdout
from arrc.lexer import ATTRIBUTES, BUILTIN_NAMES

from .cells import CellReader, is_complete, scan
from .commands import ALIASES, COMMANDS, GUARD_KINDS
from .session import KEYWORDS, Session

PROMPT, CONTINUATION = "arr> ", "...> "


def history_path() -> Path:
    """Where the prompt's history is kept: $ARRC_REPL_HISTORY, else `arrc/repl_history` in the user's
    data directory ($XDG_DATA_HOME or ~/.local/share; ~/Library/Application Support; %APPDATA%)."""
    env = os.environ.get("ARRC_REPL_HISTORY")
    if env:
        return Path(env).expanduser()
    if os.name == "nt":
        base = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "arrc" / "repl_history"


def make_completer(session: Session):
    from prompt_toolkit.completion import Completer, Completion, PathCompleter
    from prompt_toolkit.document import Document

    paths = PathCompleter(expanduser=True)

    class ArrCompleter(Completer):
        """Meta-commands, then names: the session's values and functions, builtins, keywords, dtypes."""

        def get_completions(self, document, complete_event):
            text = document.text_before_cursor
            stripped = text.lstrip()
            if stripped.startswith(":"):
                command, space, rest = stripped.partition(" ")
                if not space:
                    for c in list(COMMANDS) + list(ALIASES):
                        if c.startswith(command) and c in COMMANDS:
                            yield Completion(c, -len(command), display_meta=COMMANDS[c].help)
                    return
                command = ALIASES.get(command, command)
                if command == ":load":
                    yield from paths.get_completions(Document(rest, len(rest)), complete_event)
                    return
                if command in (":guards", ":device"):
                    word = rest.split(",")[-1].strip()
                    for c in (GUARD_KINDS + ("off",) if command == ":guards" else DEVICES):
                        if c.startswith(word):
                            yield Completion(c, -len(word))
                    return
            m = re.search(r"(\.)?([A-Za-z_][A-Za-z0-9_]*)?$", text)
            word = m.group(2) or ""
            if m.group(1):
                for a in ATTRIBUTES:
                    if a.startswith(word):
                        yield Completion(a, -len(word), display_meta="attribute")
                return
            if not word and not complete_event.completion_requested:
                return
            candidates = []
            for n, b in session.bindings.items():
                candidates.append((n, f"value {b.type}"))
            for n, it in session.items.items():
                if it.kind != "cell":
                    candidates.append((n, "function" if it.kind == "def" else "constant"))
            candidates += [(n, "builtin") for n in BUILTIN_NAMES]
            candidates += [(n, "keyword") for n in KEYWORDS]
            candidates += [(n, "dtype") for n in DTYPES]
            candidates += [(n, "constant") for n in NAMED_CONSTANTS]
            seen = set()
            for n, meta in candidates:
                if n.startswith(word) and n not in seen:
                    seen.add(n)
                    yield Completion(n, -len(word), display_meta=meta)

    return ArrCompleter()


def make_key_bindings():
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.key_binding.bindings.named_commands import get_by_name

    kb = KeyBindings()

    @kb.add("enter")
    def _enter(event):
        buf = event.current_buffer
        if buf.complete_state and buf.complete_state.current_completion:
            buf.apply_completion(buf.complete_state.current_completion)
            return
        if ("\n" not in buf.text or buf.document.is_cursor_at_the_end) and is_complete(buf.text):
            buf.validate_and_handle()
            return
        line = buf.document.current_line_before_cursor
        indent = line[:len(line) - len(line.lstrip())]
        if scan(line)[1][0].rstrip().endswith(":"):
            indent += "    "
        buf.insert_text("\n" + indent)

    @kb.add("tab")
    def _tab(event):
        buf = event.current_buffer
        before = buf.document.current_line_before_cursor
        if not before.strip():
            buf.insert_text("    ")
        else:
            get_by_name("menu-complete").handler(event)

    @kb.add("backspace", filter=True)
    def _backspace(event):
        buf = event.current_buffer
        before = buf.document.current_line_before_cursor
        if before and not before.strip() and len(before) % 4 == 0:
            buf.delete_before_cursor(4)
        else:
            buf.delete_before_cursor(1)

    return kb


def run_interactive(session: Session, input=None, output=None, history: bool = True) -> int:
    """The prompt_toolkit loop: highlighting, history across sessions, completion, multi-line blocks."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.lexers import PygmentsLexer

    from arrc.lexer import ArrReplLexer

    hist = session_history(history_path() if history else None)
    prompt = PromptSession(
        PROMPT, multiline=True, prompt_continuation=lambda width, line_number, soft_wrap: CONTINUATION,
        lexer=PygmentsLexer(ArrReplLexer), completer=make_completer(session), complete_while_typing=False,
        history=hist, key_bindings=make_key_bindings(), input=input, output=output,
        enable_history_search=False, reserve_space_for_menu=4)
    session.write(f"arr {arrc.__version__} REPL: :help for help, :quit or Ctrl-D to leave\n")
    while not session.quit:
        if hist.problem:        # (said between prompts: written during one, it would break the screen)
            session.write_err(hist.problem)
            hist.problem = ""
        try:
            text = prompt.prompt()
        except KeyboardInterrupt:
            continue
        except EOFError:
            break
        session.run(text)
    return EXIT_OK


MAX_HISTORY_BYTES = 1 << 20      # the history read is the end of the file, at most this much


def session_history(path: Path | None):
    """The prompt's history: the file at `path` (None: none), each entry as `stripped` makes it. A file
    that cannot be read or appended to (a directory, a device, no permission, a full disk) is given up,
    and the history is kept in memory for the session; `problem` says why, once."""
    from prompt_toolkit.history import FileHistory

    class History(FileHistory):
        def __init__(self):
            super().__init__(str(path))
            self.path = path
            self.problem = ""
            self.entries = self.read() if path else []

        def give_up(self, err: OSError) -> None:
            self.problem = (f"warning: cannot use the history file {self.path} ({err.strerror or err}); "
                            f"the history of this session is not kept\n")
            self.path = None

        def read(self) -> list[str]:
            """The entries of the file's last MAX_HISTORY_BYTES, newest first (a regular file only: a device
            such as /dev/zero never ends)."""
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                if path.exists() and not path.is_file():
                    raise OSError(errno.EINVAL, "not a regular file")
                with open(path, "ab"):          # created, and appendable
                    pass
                with open(path, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    f.seek(max(0, size - MAX_HISTORY_BYTES))
                    lines = f.read(MAX_HISTORY_BYTES).decode("utf-8", "replace").split("\n")
            except OSError as err:
                self.give_up(err)
                return []
            if size > MAX_HISTORY_BYTES:        # a line cut short, then the rest of its entry
                lines.pop(0)
                while lines and lines[0].startswith("+"):
                    lines.pop(0)
            entries, entry = [], []
            for line in lines + [""]:
                if line.startswith("+"):
                    entry.append(line[1:])
                elif entry:
                    entries.append("\n".join(entry))
                    entry = []
            return entries[::-1]

        def load_history_strings(self):
            return self.entries

        def append_string(self, string: str) -> None:
            super().append_string(stripped(string))     # what Up brings back is what ran

        def store_string(self, string: str) -> None:
            if self.path is None:
                return
            try:
                super().store_string(string)
            except OSError as err:
                self.give_up(err)

    return History()


def stripped(text: str) -> str:
    """A cell as the history keeps it: no trailing blank lines, no spaces at line ends."""
    return "\n".join(line.rstrip() for line in text.rstrip().split("\n"))


def run_piped(session: Session, stdin) -> int:
    """Cells from a pipe or file: the same results, no prompts, no terminal needed."""
    reader = CellReader()
    for number, line in enumerate(stdin):
        if number == 0:
            line = line.removeprefix("\ufeff")     # a byte order mark, as `decode` skips a file's
        for cell in reader.feed(line):
            session.run_cell(cell)
            if session.quit:
                return session.exit_code
    for cell in reader.close():
        session.run_cell(cell)
        if session.quit:
            break
    return session.exit_code


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="arrc repl", description="The interactive arr prompt.")
    p.add_argument("files", nargs="*", metavar="FILE", help="files to :load first")
    p.add_argument("--guards", metavar="KINDS", help="nan,inf,bounds,div0 or all")
    p.add_argument("--device", choices=DEVICES, default="cpu", help="device (default: cpu)")
    p.add_argument("--no-history", action="store_true", help="do not read or write the history file")
    p.add_argument("--no-color", action="store_true", help="no colours in diagnostics")
    return p


def main(argv: list[str] | None = None, stdin=None, stdout=None, stderr=None) -> int:
    """`arrc repl [FILE...] [--guards KINDS] [--device NAME]`: a prompt on a terminal, else a script
    from stdin: values on stdout, diagnostics and notes on stderr. Returns the exit status."""
    keep_lost_interrupts()
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    out = stdout if stdout is not None else sys.stdout
    interactive = stdin is None and stdout is None and sys.stdin.isatty() and sys.stdout.isatty()
    width = 75
    if interactive:
        import shutil
        width = max(40, shutil.get_terminal_size().columns - 1)
    color = interactive and not args.no_color and not os.environ.get("NO_COLOR")
    err = stderr if stderr is not None else sys.stderr
    session = Session(out, width=width, color=color, err=err)
    quiet = Session(io.StringIO())              # checks the settings, prints nothing when they are fine
    for flag, value in (("--guards", args.guards), ("--device", args.device if args.device != "cpu" else None)):
        if value is not None and not quiet.run_cell(f":{flag[2:]} {value}"):   # (a flag's error, as arrc run's)
            problem = quiet.out.getvalue().strip().removeprefix("error: ").split("; still on ")[0]
            err.write(f"arrc repl: error: {flag} {value}: {problem}\n")
            return EXIT_USAGE
    session.guards, session.device = quiet.guards, quiet.device
    for path in args.files:
        session.load(path)
    try:
        if interactive:
            return run_interactive(session, history=not args.no_history)
        if stdin is None and hasattr(sys.stdin, "reconfigure"):
            sys.stdin.reconfigure(encoding="utf-8", errors="surrogateescape")   # a bad byte is E0003 (run_source)
        return run_piped(session, stdin if stdin is not None else sys.stdin)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:         # the reader of the output left (`arrc repl < s.arr | head`): done, quietly
        drop_stdout()
        return session.exit_code
    except OSError as failed:       # no room for the output (a full disk)
        err.write(f"arrc repl: error: {failed.strerror or failed}\n")
        return EXIT_USAGE
