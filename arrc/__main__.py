"""`python -m arrc ...`: the same as the `arrc` command."""
from arrc.launch import entry

entry()
