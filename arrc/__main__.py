"""`python -m arrc ...`: the same as the `arrc` command."""
from arrc.cli import entry

entry()
