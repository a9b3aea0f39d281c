"""`python -m arrc ...`: the same as the `arrc` command."""
import sys

from arrc.cli import main

sys.exit(main())
