"""The `arrc` command (and `python -m arrc`): Ctrl-C held back while it loads the compiler, jaxlib's MLIR
bindings and NumPy (~0.3-1 s: a KeyboardInterrupt inside those imports printed a traceback, and inside
jaxlib's could crash the process), then `arrc.cli.entry`. A Ctrl-C that came meanwhile ends it as one during
the command does: "arrc: interrupted", status 130."""
import os
import sys

from arrc.compiler.signals import sigint_deferred


def entry() -> None:
    try:
        with sigint_deferred():
            for name in ("stdout", "stderr"):       # a closed one (`arrc ... >&-`): Python makes it None
                if getattr(sys, name) is None:
                    setattr(sys, name, open(os.devnull, "w"))   # noqa: SIM115 (the process's, to its end)
            from arrc.cli import entry as run
    except KeyboardInterrupt:
        from arrc.exits import EXIT_INTERRUPTED
        sys.stderr.write("arrc: interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
    run()
