"""`arrc repl`: the interactive arr prompt (LANGUAGE.md section 11).

Cells: a meta-command (`:help`), a `def`/`const` (one or several), an assignment (`x = e`, `a, b = e`,
`x += e`), an expression (its value is shown with its type), or any other statement (`print`, `assert`,
`for`, `if`, `x[i] = e`...), which runs as the body of a function whose parameters and results are the
bindings it assigns. Errors are the rendered diagnostics of the CLI with spans in the cell (`<cell 3>`)
and never a traceback; the session continues.

Without a terminal (`arrc repl < script.txt`) the cells are read from stdin and the same results are
printed, without prompts (values on stdout, diagnostics and notes on stderr); the exit status is then that of the first failing cell (1 for compile errors,
2 for a bad command, 3 for run-time failures), 0 if none failed.

The parts: `session.py` (the state and how a cell runs), `commands.py` (the meta-commands), `help.py`
(what `:help`/`:type` say of builtins and other names), `cells.py` (where a cell ends), `display.py` (how
values are shown), `terminal.py` (the prompt, pipes, `main`).
"""
from arrc.exits import EXIT_COMPILE, EXIT_INTERNAL, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE

from .cells import CellReader, is_block, is_complete, open_brackets, split_cells
from .display import format_seconds, show, type_str, value_str
from .session import CellError, Session
from .terminal import history_path, main, make_completer, make_key_bindings, run_interactive, run_piped

__all__ = ["EXIT_COMPILE", "EXIT_INTERNAL", "EXIT_OK", "EXIT_RUNTIME", "EXIT_USAGE", "CellError", "CellReader",
           "Session", "format_seconds", "history_path", "is_block", "is_complete", "main", "make_completer",
           "make_key_bindings", "open_brackets", "run_interactive", "run_piped", "show", "split_cells",
           "type_str", "value_str"]
