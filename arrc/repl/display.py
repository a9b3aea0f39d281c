"""How the REPL shows values: `f32[3] = [1. 2. 3.]`, NumPy's text with arr's types, and durations."""
from __future__ import annotations

import numpy as np

from arrc.compiler.types import KEY, dtype_of_numpy, host_keys
from arrc.runtime.effects import format_value


def dtype_name(value) -> str:
    """The arr dtype of a value: a NumPy array's, or `key` for JAX typed keys."""
    if host_keys(value) is not None:
        return KEY.name
    dt = dtype_of_numpy(value.dtype)
    return dt.name if dt is not None else str(value.dtype)


def type_str(value) -> str:
    """The arr type of a NumPy value (or JAX keys): `f32[2, 3]`, `i32`, `key[4]`."""
    name = dtype_name(value)
    return f"{name}[{', '.join(str(d) for d in value.shape)}]" if value.ndim else name


def value_str(value, width: int = 75, indent: int = 0) -> str:
    """NumPy-style text of a value (large arrays summarized); bools as `true`/`false`; keys as their words."""
    keys = host_keys(value)
    return format_value(value if keys is None else keys, keys is not None, width, indent)


def show(values: list[np.ndarray], tuple_result: bool, width: int = 75) -> str:
    """`f32[3] = [1. 2. 3.]`; a tuple `(i32, f32[2]) = (1, [1. 2.])` (of one: `(i32,) = (3,)`), or one
    value a line if long."""
    if not tuple_result:
        head = f"{type_str(values[0])} = "
        return head + value_str(values[0], width, len(head)) + "\n"
    one = "," if len(values) == 1 else ""      # a tuple of one, as Python writes it: `(3,)`
    types = "(" + ", ".join(type_str(v) for v in values) + one + ")"
    texts = [value_str(v, width) for v in values]
    line = f"{types} = (" + ", ".join(texts) + one + ")"
    if all("\n" not in t for t in texts) and len(line) <= width:
        return line + "\n"
    return f"{types} =\n" + "".join("  " + value_str(v, width, 2) + "\n" for v in values)


def format_seconds(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.3f} s"
