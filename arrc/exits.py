"""The exit statuses of `arrc` and `arrc repl` (a script's status is its first failure's)."""
EXIT_OK = 0
EXIT_COMPILE = 1          # a diagnostic: the program does not compile
EXIT_USAGE = 2            # a bad command line, argument or file
EXIT_RUNTIME = 3          # a run-time failure: a guard or an assert
EXIT_INTERNAL = 4         # a bug in arrc, MLIR or XLA (E0601)
EXIT_INTERRUPTED = 130    # Ctrl-C (128 + SIGINT), as shells report it


def drop_stdout() -> None:
    """After the reader of stdout left: later writes (Python's own flush at exit) go nowhere, silently."""
    import os
    import sys
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):      # (no file behind it)
        pass
