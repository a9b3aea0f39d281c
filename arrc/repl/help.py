"""What `:type NAME` and `:help NAME` say of a name that is not the session's: a builtin (its signature and
doc line, read from the op table, compiler/optable.py), an attribute, a dtype, a keyword, a named constant,
a derivative transform or a diagnostic code (its title, and where its page is)."""
from __future__ import annotations

from arrc.compiler.builtins import BUILTINS
from arrc.compiler.check import METHOD_FORMS, NAMED_CONSTANTS
from arrc.compiler.diagnostics import CODES
from arrc.compiler.fastparse import KEYWORDS
from arrc.compiler.suggest import closest
from arrc.compiler.types import DTYPES

# Derivatives are forms of the checker (compiler/check.py `call_derivative`), not entries of the op table:
# how they are called, as LANGUAGE.md section 13 writes it.
TRANSFORMS = {
    "grad": "grad(f, argnums=0)(args...)",
    "value_and_grad": "value_and_grad(f, argnums=0)(args...) -> (value, derivatives)",
    "jvp": "jvp(f, primals, tangents) -> (value, tangent)",
    "vjp": "vjp(f, primals, cotangent) -> (value, cotangents)",
}


def _default(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else repr(value)


def builtin_signatures(name: str) -> list[str]:
    """A builtin's call forms from its op-table entry, the method form after the function form:
    `sum(x, axis=None, keepdims=false)`, `x.sum(axis=None, keepdims=false)`; an attribute's `x.shape`."""
    op = BUILTINS.get(name) if name[:1].isalpha() else None
    attribute = BUILTINS.get("." + name.lstrip("."))
    forms = []
    if op is not None:
        params = [p if p not in op.defaults else f"{p}={_default(op.defaults[p])}" for p in op.params]
        forms.append(f"{name}({', '.join(params)})")
        if name in METHOD_FORMS and params:
            forms.append(f"{op.params[0]}.{name}({', '.join(params[1:])})")
    if attribute is not None:
        rest = [p if p not in attribute.defaults else f"{p}={_default(attribute.defaults[p])}"
                for p in attribute.params[1:]]
        call = f"({', '.join(rest)})" if attribute.method else ""
        forms.append(f"{attribute.params[0]}{attribute.name}{call}")
    return forms


def type_text(name: str) -> str | None:
    """What `:type NAME` shows for a builtin or an attribute (its call forms, one a line), else None."""
    if name in TRANSFORMS:
        return TRANSFORMS[name] + "\n"
    forms = builtin_signatures(name)
    return "".join(f + "\n" for f in forms) if forms else None


def help_text(name: str) -> str | None:
    """What `:help NAME` shows for a name that is not the session's, else None."""
    name = name.strip()
    if name in TRANSFORMS:
        return f"{TRANSFORMS[name]}\n  a derivative of the function `f` (see docs/autodiff.md)\n"
    forms = builtin_signatures(name)
    if forms:
        lines = []
        op = BUILTINS.get(name) if name[:1].isalpha() else None
        if op is not None:
            lines += [forms[0], f"  {op.doc} (builtin, {op.family.lower()})"]
            if len(forms) > 1 and name in METHOD_FORMS:
                lines.append(f"  also a method: {forms[1]}")
            lines.append(f"  `:type {name}(...)` gives the type of a call")
        attribute = BUILTINS.get("." + name.lstrip("."))
        if attribute is not None:
            lines += [forms[-1], f"  {attribute.doc} ({'method' if attribute.method else 'attribute'})"]
        return "\n".join(lines) + "\n"
    if name in DTYPES:
        dt = DTYPES[name]
        kind = {"bool": "booleans", "int": "signed integers", "uint": "unsigned integers",
                "float": "floats"}[dt.kind]
        bits = "" if dt.kind == "bool" else f"{dt.bits}-bit "
        return (f"{name}: a dtype, {bits}{kind} (NumPy {dt.np.name}); `{name}[3]` is a vector type, "
                f"`{name}(x)` converts\n")
    if name == "key":
        return "key: the dtype of PRNG keys; `key(seed)` makes one (see docs/random.md)\n"
    if name in NAMED_CONSTANTS:
        return f"{name}: a named constant, a float literal ({NAMED_CONSTANTS[name]}; weak f32, as `1.5`)\n"
    if name in KEYWORDS:
        return f"{name}: a keyword of arr (see docs/language.md)\n"
    code = name.upper()
    if code in CODES:
        return f"{code}: {CODES[code]}; `arrc explain {code}` shows its page (examples, what to do)\n"
    return None


def names() -> list[str]:
    """Every name `help_text` knows (for did-you-mean)."""
    return (sorted(n for n in BUILTINS if n[:1].isalpha()) + [n.lstrip(".") for n in BUILTINS if n[:1] == "."]
            + list(TRANSFORMS) + list(DTYPES) + list(NAMED_CONSTANTS) + sorted(KEYWORDS))


def suggestion(name: str, known: list[str]) -> str:
    near = closest(name, known + names())
    return f" (did you mean `{near}`?)" if near else ""
