"""Convolution (LANGUAGE.md section 13): `conv`, as `jax.lax.conv_general_dilated`, and `conv_transpose`.

Shapes follow XLA's (and JAX's) rules, computed in the checker, symbolically where the sizes are shape
variables: per spatial dimension, the input dilated by `lhs_dilation` and padded, the window dilated by
`rhs_dilation`, then `(padded - window) // stride + 1` positions. "SAME" pads as JAX does (output size
`ceil(size / stride)`, the total padding split low-first) and "VALID" not at all. `layout` names the
dimensions of the input, the kernel and the output as JAX's dimension-number strings do: N and C (batch
and feature) for the input and output, O and I (output and input feature) for the kernel, the same
spatial letters in each (the kernel's order is the spatial order); by default N, C (O, I) then the
spatial dimensions in order, JAX's default.
"""
from __future__ import annotations

import numpy as np

from . import emit
from .diagnostics import Label, plural
from .emit import hlo
from .ops_shape import _promoted
from .optable import CallCx, concrete, register
from .types import ArrayType, Dim
from .values import StrVal, TupleVal, Val, describe

ONE = Dim.const(1)


def _layout(cx: CallCx, layout, rank: int) -> tuple:
    """(input, kernel, output) dimension numbers: each the positions of (batch or out-feature, feature or
    in-feature, spatial dimensions in the kernel's spatial order)."""
    if layout is None:
        spatial = "".join("DHWXYZUV"[-(rank - 2):]) if rank > 2 else ""
        specs = ("NC" + spatial, "OI" + spatial, "NC" + spatial)
    elif isinstance(layout, TupleVal) and len(layout.items) == 3 and all(isinstance(s, StrVal) for s in layout.items):
        specs = tuple(s.text for s in layout.items)
    else:
        cx.error("E0204", f"`layout` must be three strings such as (\"NCHW\", \"OIHW\", \"NCHW\"), found "
                          f"{describe(layout)}", "not three strings", at="layout")
    if any(spec != spec.upper() for spec in specs):
        written = ", ".join(f'"{spec.upper()}"' for spec in specs)
        cx.error("E0204", "`layout` letters are capitals", "lower-case letters", at="layout",
                 help=f"write layout=({written}), as jax.lax.conv_general_dilated")
    kernel_spatial = [c for c in specs[1] if c not in "OI"]
    for spec, pair, what in zip(specs, ("NC", "OI", "NC"), ("input", "kernel", "output")):
        spatial = [c for c in spec if c not in pair]
        if len(spec) != rank or any(spec.count(c) != 1 for c in pair) or len(set(spec)) != len(spec):
            cx.error("E0204", f"the {what} layout \"{spec}\" does not describe an array of rank {rank}",
                     f"needs {pair[0]} and {pair[1]} once and {rank - 2} spatial letters", at="layout",
                     help="e.g. layout=(\"NHWC\", \"HWIO\", \"NHWC\") for channels-last 2-D images")
        if sorted(spatial) != sorted(kernel_spatial):
            cx.error("E0204", f"the layouts name different spatial dimensions: \"{specs[1]}\" (the kernel's) has "
                              f"{''.join(kernel_spatial)}, \"{spec}\" (the {what}'s) has "
                              f"{''.join(spatial)}", "spatial letters differ", at="layout",
                     help="the three layouts use the same letters for the spatial dimensions, e.g. "
                          "(\"NHWC\", \"HWIO\", \"NHWC\")")
    return tuple((spec.index(pair[0]), spec.index(pair[1]), [spec.index(c) for c in kernel_spatial])
                 for spec, pair in zip(specs, ("NC", "OI", "NC")))


def _per_dimension(cx: CallCx, v, name: str, n: int) -> list[int]:
    """An int for every spatial dimension, or a tuple or list of one per spatial dimension (as lax's; a
    sequence of one value for two dimensions is E0204 there too); each at least 1."""
    if isinstance(v, TupleVal):
        values = [cx.const_int(i, name) for i in v.items]
    elif isinstance(v, Val) and isinstance(v.static, np.ndarray) and v.type.dtype.is_int and v.static.ndim == 1:
        values = [int(x) for x in v.static]          # a list literal, `strides=[1, 2]`, as padding takes one
    else:
        values = [cx.const_int(v, name)] * n
    if len(values) != n:
        cx.error("E0204", f"`{name}` gives {plural(len(values), 'value')} for {plural(n, 'spatial dimension')}",
                 plural(len(values), "value"), at=name, help="give one int for every dimension, or one per dimension")
    if any(x < 1 for x in values):
        cx.error("E0204", f"`{name}` must be at least 1, found {min(values)}", "not positive", at=name)
    return values


def _explicit_padding(cx: CallCx, padding, n: int) -> list[tuple[int, int]]:
    """[(lo, hi), ...] given as a list literal or a tuple of pairs (negative values crop, as in XLA)."""
    pairs = None
    if isinstance(padding, Val) and isinstance(padding.static, np.ndarray) and padding.type.dtype.is_int \
            and padding.static.shape == (n, 2):
        pairs = [tuple(int(x) for x in row) for row in padding.static]
    elif isinstance(padding, TupleVal) and all(isinstance(p, TupleVal) and len(p.items) == 2 for p in padding.items):
        pairs = [(cx.const_int(p.items[0], "padding"), cx.const_int(p.items[1], "padding")) for p in padding.items]
    if pairs is None or len(pairs) != n:
        cx.error("E0204", f"`padding` must be \"VALID\", \"SAME\" or one (low, high) pair per spatial dimension "
                          f"({n} here), found {describe(padding)}", "not a padding", at="padding",
                 help="e.g. padding=[(1, 1), (1, 1)] for a 2-D convolution")
    return pairs


@register("conv", params='x, w, strides=1, padding="VALID", lhs_dilation=1, rhs_dilation=1, groups=1, layout=None',
          family="Linear algebra", doc="N-d convolution, as jax.lax.conv_general_dilated", words="convolution")
def _conv(cx: CallCx, x, w, strides, padding, lhs_dilation, rhs_dilation, groups, layout) -> Val:
    x, w = _operands(cx, x, w, "`conv`")
    n = x.type.rank - 2
    groups = cx.const_int(groups, "groups") if not isinstance(groups, int) else groups
    return _convolve(cx, x, w, _layout(cx, layout, x.type.rank), _per_dimension(cx, strides, "strides", n),
                     _padding(cx, padding, n), _per_dimension(cx, lhs_dilation, "lhs_dilation", n),
                     _per_dimension(cx, rhs_dilation, "rhs_dilation", n), groups)


@register("conv_transpose",
          params='x, w, strides=1, padding="VALID", rhs_dilation=1, layout=None, transpose_kernel=False',
          family="Linear algebra", doc="transposed (fractionally strided) convolution, as jax.lax.conv_transpose",
          words="convolution")
def _conv_transpose(cx: CallCx, x, w, strides, padding, rhs_dilation, layout, transpose_kernel) -> Val:
    """JAX's `conv_transpose`: a convolution of stride 1 over the input dilated by `strides`, padded so
    that "SAME" and "VALID" invert the forward convolution's shapes (explicit pairs are used as they are,
    as JAX does by default); channels-last by default; `transpose_kernel` flips the kernel in space and
    swaps its O and I dimensions (Keras' Conv2DTranspose)."""
    x, w = _operands(cx, x, w, "`conv_transpose`")
    rank, n = x.type.rank, x.type.rank - 2
    if layout is None:
        spatial = "HWD"[:n]
        layout = TupleVal([StrVal(s) for s in ("N" + spatial + "C", spatial + "IO", "N" + spatial + "C")])
    specs = _layout(cx, layout, rank)
    strides = _per_dimension(cx, strides, "strides", n)
    rhs_dilation = _per_dimension(cx, rhs_dilation, "rhs_dilation", n)
    if cx.bool_flag(transpose_kernel, "transpose_kernel"):
        o, i, spatial_dims = specs[1]
        shape = list(w.type.shape)
        shape[o], shape[i] = shape[i], shape[o]
        perm = list(range(rank))
        perm[o], perm[i] = perm[i], perm[o]
        kernel = w
        w = cx.value(ArrayType(w.type.dtype, tuple(shape), w.type.weak),
                     lambda: hlo.transpose(hlo.reverse(cx.ir(kernel), spatial_dims), perm))
    padding = _padding(cx, padding, n)
    if isinstance(padding, str):
        windows = [(w.type.shape[d] - ONE) * Dim.const(r) + ONE for d, r in zip(specs[1][2], rhs_dilation)]
        if not all(k.is_const for k in windows):
            cx.error("E0204", "`conv_transpose` with \"SAME\" or \"VALID\" padding needs the kernel's size known",
                     "a symbolic kernel size", at="w", help="give its size, or explicit padding pairs")
        padding = [_transpose_padding(k.value, s, padding) for k, s in zip(windows, strides)]
    return _convolve(cx, x, w, specs, [1] * n, padding, strides, rhs_dilation, 1, "`conv_transpose`")


def _transpose_padding(k: int, s: int, padding: str) -> tuple[int, int]:
    """JAX's `_conv_transpose_padding` for a dilated window `k` and stride `s`."""
    if padding == "SAME":
        total = k + s - 2
        low = k - 1 if s > k - 1 else -(-total // 2)
    else:
        total, low = k + s - 2 + max(k - s, 0), k - 1
    return low, total - low


def _operands(cx: CallCx, x, w, what: str) -> tuple[Val, Val]:
    x, w = cx.array(x, "x"), cx.array(w, "w")
    if x.type.rank < 3 or w.type.rank != x.type.rank:
        cx.error("E0202", f"{what} needs an input and a kernel of the same rank, 3 to 5 (1 to 3 spatial "
                          f"dimensions), found {x.type} and {w.type}", "",
                 labels=[Label(cx.at("x"), f"the input is {x.type}"), Label(cx.at("w"), f"the kernel is {w.type}")])
    return x, w


def _padding(cx: CallCx, padding, n: int):
    """"VALID", "SAME" or [(lo, hi), ...] as ints."""
    padding = StrVal(padding) if isinstance(padding, str) else padding      # (the default)
    if isinstance(padding, StrVal):
        if padding.text not in ("VALID", "SAME"):
            cx.error("E0204", f"`padding` must be \"VALID\" or \"SAME\", found \"{padding.text}\"",
                     "unknown padding", at="padding")
        return padding.text
    return _explicit_padding(cx, padding, n)


def _convolve(cx: CallCx, x: Val, w: Val, specs, strides: list, padding, lhs_dilation: list, rhs_dilation: list,
              groups: int, what: str = "`conv`") -> Val:
    """The convolution of `x` by `w`: `specs` from `_layout`, `padding` "VALID", "SAME" or (lo, hi) pairs."""
    tx, tw = x.type, w.type

    def labels() -> list:           # (for the errors only: types are printed when one is raised)
        return [Label(cx.at("x"), f"the input is {tx}"), Label(cx.at("w"), f"the kernel is {tw}")]
    dtype, weak = _promoted(cx, [x, w], what)
    if dtype.is_bool:
        cx.error("E0201", f"{what} is not defined on bool", "bool operands", help="convert with `.astype(i32)`")
    n = tx.rank - 2
    (xb, xf, xs), (wo, wi, ws), (ob, of, os) = specs
    features, in_features, out_features = tx.shape[xf], tw.shape[wi], tw.shape[wo]
    if groups < 1:
        cx.error("E0204", f"`groups` must be at least 1, found {groups}", "not positive", at="groups")
    if features != in_features * Dim.const(groups):
        grouped = f" times {groups} groups" if groups > 1 else ""
        cx.error("E0202", f"{what}: the input has {features} features, the kernel takes {in_features}{grouped}",
                 f"{features} vs {in_features}{grouped}", labels=labels(),
                 notes=["the kernel's I dimension is the input's features divided by `groups`"])
    # a symbolic count is checked once the function is specialized (this rule runs again on constants)
    if out_features.is_const and out_features.value % groups:
        cx.error("E0202", f"{what}: the kernel's {out_features} output features do not split into {groups} groups",
                 f"{out_features} output features", at="w")
    for i, d in enumerate(ws):
        if tw.shape[d].is_const and tw.shape[d].value == 0:     # (XLA's verifier refuses an empty window)
            cx.error("E0202", f"{what}: the kernel's spatial dimension {i} is empty", "an empty window",
                     labels=labels(), help="a kernel needs at least one element along every spatial dimension")
    sizes = [tx.shape[d] for d in xs]
    windows = [(tw.shape[d] - ONE) * Dim.const(r) + ONE for d, r in zip(ws, rhs_dilation)]
    dilated = [(s - ONE) * Dim.const(r) + ONE for s, r in zip(sizes, lhs_dilation)]
    if isinstance(padding, str) and any(r != 1 for r in lhs_dilation):
        cx.error("E0204", f"{what} with \"{padding}\" padding cannot dilate the input (`lhs_dilation`), as in JAX",
                 f"\"{padding}\" with lhs_dilation", at="padding",
                 help="give explicit (low, high) padding pairs, or use `conv_transpose` for a fractionally strided "
                      "convolution")
    if padding == "VALID":
        pads = [(Dim.const(0), Dim.const(0))] * n
        out = [Dim.quotient(d - k, Dim.const(s)) + ONE for d, k, s in zip(dilated, windows, strides)]
    elif padding == "SAME":     # JAX's padtype_to_pads: ceil(size / stride) positions
        out = [Dim.quotient(size + Dim.const(s - 1), Dim.const(s)) for size, s in zip(sizes, strides)]
        pads = None
    else:
        pads = [(Dim.const(lo), Dim.const(hi)) for lo, hi in padding]
        out = [Dim.quotient(d + lo + hi - k, Dim.const(s)) + ONE for d, (lo, hi), k, s in
               zip(dilated, pads, windows, strides)]
    for i, o in enumerate(out):
        if o.is_const and o.value < 1:
            padded = pads and any(p.value for p in pads[i])
            steps = [f"{sizes[i]}"] + ([f"dilated to {dilated[i]}"] if lhs_dilation[i] != 1 else []) + \
                ([f"padded to {dilated[i] + pads[i][0] + pads[i][1]}"] if padded else [])
            cx.error("E0202", f"{what} leaves spatial dimension {i} empty: the window ({windows[i]} after dilation) "
                              f"is larger than the input ({', '.join(steps)})",
                     "an empty output", labels=labels(), help="pad more, or use a smaller kernel or dilation")
    shape = [None] * tx.rank
    shape[ob], shape[of] = tx.shape[xb], out_features
    for d, o in zip(os, out):
        shape[d] = o
    shape = tuple(shape)

    def build():
        if pads is None:            # SAME: the total padding (out - 1) * stride + window - size, low half first
            totals = [max((o.value - 1) * s + k.value - size.value, 0)
                      for o, s, k, size in zip(out, strides, windows, sizes)]
            low = [t // 2 for t in totals]
            padding_ = [(lo, t - lo) for lo, t in zip(low, totals)]
        else:
            padding_ = [(lo.value, hi.value) for lo, hi in pads]
        return emit.convolution(emit.tensor_type(concrete(shape), dtype), cx.ir(x, dtype), cx.ir(w, dtype),
                                specs, strides, padding_, lhs_dilation, rhs_dilation, features=groups)
    return cx.value(ArrayType(dtype, shape, weak), build)
