"""The operation table: one entry per builtin and operator, each with its type rule and lowering rule, its
display name (locations, diagnostics), the words guard reports use and, for named builtins, the family and
one-line doc that docs/language.md's builtin list is generated from
(the machinery is `optable.py`; the rules are in the `ops_*` modules, imported here so the tables are full
wherever they are read)."""
from __future__ import annotations

from . import ops_conv, ops_elementwise, ops_index, ops_linalg, ops_random, ops_reduce, ops_scan, ops_shape  # noqa: F401  (they register)
from .optable import (BUILTINS, OPERATORS, Builtin, CallCx, bind_arguments, check_literal,  # noqa: F401
                      refuse_keys, weak_literal_fits)
