"""Diagnostics as data, rendered in one place (text, rustc-style, and JSON)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from .span import Source, Span

# code -> one-line title. Long explanations live in docs/errors/CODE.md.
CODES: dict[str, str] = {
    "E0001": "syntax error",
    "E0002": "tab in indentation",
    "E0003": "invalid source text",
    "E0004": "program nested too deeply",
    "E0101": "undefined name",
    "E0102": "duplicate definition",
    "E0103": "wrong arguments in a call",
    "E0104": "recursion is not allowed",
    "E0105": "cannot assign to this name",
    "E0106": "statement not supported here",
    "E0201": "dtype not allowed for this operation",
    "E0202": "shapes do not match",
    "E0203": "result does not match the declared type",
    "E0204": "invalid argument to a builtin",
    "E0205": "invalid type",
    "E0206": "shape variable not bound by the parameters",
    "E0207": "shape depends on a run-time value",
    "E0208": "index out of range",
    "E0209": "wrong number of values to unpack",
    "E0210": "value of the wrong kind",
    "E0211": "literal out of range for its dtype",
    "E0212": "argument type does not match the parameter",
    "E0213": "condition must be a scalar bool",
    "E0214": "missing return",
    "E0215": "array too large",
    "E0216": "cannot differentiate this",
    "E0301": "variable has different types on different paths",
    "E0302": "loop changes the type of a carried variable",
    "E0303": "boolean mask indexing has a value-dependent shape",
    "E0304": "slice length is not static",
    "E0501": "StableHLO module has a dynamic shape",
    "E0502": "invalid StableHLO module",
    "E0503": "StableHLO module uses something arrc cannot run safely",
    "E0504": "the target backend cannot run this operation on this dtype",
    "E0601": "internal compiler error",
    "W0001": "lossy implicit promotion",
    "W0002": "text-direction control character in source",
    "W0003": "a random key is used more than once",
    "W0004": "a loop differentiated by recomputation",
    "W0005": "a float literal too large for its dtype",
    "W0006": "an integer sum can overflow its accumulator",
    "R0001": "NaN produced at run time",
    "R0002": "infinity produced at run time",
    "R0003": "index out of range at run time",
    "R0004": "integer division by zero at run time",
    "R0005": "assertion failed",
    "R0006": "a loop ran past its bound in a derivative",
}


@dataclass(frozen=True)
class Label:
    span: Span
    message: str


@dataclass
class Diagnostic:
    code: str
    message: str
    span: Span | None
    label: str = ""                      # text under the primary carets
    labels: list[Label] = field(default_factory=list)   # secondary spans
    notes: list[str] = field(default_factory=list)
    help: str | None = None
    severity: str = ""                   # "error" or "warning"; derived from the code unless set

    def __post_init__(self):
        if not self.severity:
            self.severity = "warning" if self.code.startswith("W") else "error"

    def as_dict(self) -> dict:
        return {
            "code": self.code, "severity": self.severity, "message": self.message,
            "span": self.span.as_dict() if self.span else None,
            "label": self.label,
            "labels": [{"span": l.span.as_dict(), "message": l.message} for l in self.labels],
            "notes": list(self.notes), "help": self.help,
        }


class CompileError(Exception):
    """Raised when a program has errors; `.diagnostics` lists them all, `str()` renders them."""

    def __init__(self, diagnostics: list[Diagnostic], sources: dict[str, Source] | None = None):
        self.diagnostics = diagnostics
        self.sources = sources if sources is not None else {}
        super().__init__(render_all(diagnostics, self.sources))

    def __str__(self) -> str:
        return render_all(self.diagnostics, self.sources)


# Characters a terminal would not show as one column (a tab is several, a \r overwrites the line): shown
# as one visible column each (Unicode control pictures), so carets stay aligned (columns count characters).
# A lone surrogate (source text given to `arrc.loads` as a Python str) cannot even be written: U+FFFD. So
# is a text-direction control (W0002), which would reorder the line shown and take no column.
_DISPLAYABLE = str.maketrans({**{c: chr(0x2400 + c) for c in range(0x20)}, 0x7F: "\u2421",
                              0x85: "\u2424", 0x2028: "\u2424", 0x2029: "\u2424",
                              **{c: "\ufffd" for c in range(0xD800, 0xE000)},
                              **{c: "\ufffd" for c in (0x61C, 0x200E, 0x200F, *range(0x202A, 0x202F),
                                                       *range(0x2066, 0x206A))}})


SHOWN_LINE_CHARS = 160     # a longer source line is shown around its first mark, cut with "..." (a generated
SHOWN_BEFORE_MARK = 40     # line of 200,000 terms was printed whole, twice counting its carets)


def _shown(line_text: str, first_col: int) -> tuple[str, int]:
    """The part of a source line a diagnostic shows, and how many columns it starts after the line's."""
    if len(line_text) <= SHOWN_LINE_CHARS:
        return line_text, 0
    start = max(0, first_col - 1 - SHOWN_BEFORE_MARK)
    end = min(len(line_text), start + SHOWN_LINE_CHARS)
    shown = ("..." if start else "") + line_text[start:end] + ("..." if end < len(line_text) else "")
    return shown, start - (3 if start else 0)


def _caret_line(span: Span, label: str, line_text: str, marker: str, pad: str, shift: int = 0) -> str:
    """The carets under `span` on `line_text`, shown `shift` columns after the line's start (`_shown`)."""
    col = max(1, span.col - shift)
    end_col = min(span.end_col - shift, len(line_text) + 1) if span.end_line == span.line else len(line_text) + 1
    width = max(1, end_col - col)
    return f"{pad} | " + " " * (col - 1) + marker * width + (f" {label}" if label else "")


def render(diag: Diagnostic, sources: dict[str, Source]) -> str:
    """Render one diagnostic rustc-style: header, location, source lines with carets, notes, help.

    Each source line is shown once; every span on it gets its own caret line (`^` primary, `-` others).
    """
    out = [f"{diag.severity}[{diag.code}]: {diag.message}"]
    marks = ([(diag.span, diag.label, "^")] if diag.span else []) + [(l.span, l.message, "-") for l in diag.labels]
    gutter = max([len(str(s.line)) for s, _, _ in marks] + [1])
    pad = " " * gutter
    if diag.span:
        out.append(f"{pad}--> {diag.span}")
    shown_bar = False
    lines = []
    for span, _, _ in marks:
        if (span.file, span.line) not in lines:
            lines.append((span.file, span.line))
    primary_file = diag.span.file if diag.span else None
    lines.sort(key=lambda fl: (fl[0] != primary_file, fl[0], fl[1]))     # source order, primary file first
    for key in lines:
        span = next(s for s, _, _ in marks if (s.file, s.line) == key)
        src = sources.get(span.file)
        if src is None:
            continue
        if diag.span is not None and span.file != diag.span.file:
            out.append(f"{pad}::: {span}")
        if not shown_bar:
            out.append(f"{pad} |")
            shown_bar = True
        on_line = [(other, label, marker) for other, label, marker in marks if (other.file, other.line) == key]
        line_text, shift = _shown(src.line_text(span.line).translate(_DISPLAYABLE), min(s.col for s, _, _ in on_line))
        out.append(f"{str(span.line).rjust(gutter)} | {line_text}")
        for other, label, marker in on_line:
            out.append(_caret_line(other, label, line_text, marker, pad, shift))
    if diag.notes or diag.help:
        out.append(f"{pad} |")
    out.extend(f"{pad} = note: {n}" for n in diag.notes)
    if diag.help:
        out.append(f"{pad} = help: {diag.help}")
    return "\n".join(out) + "\n"


def plural(n: int, word: str) -> str:
    """`1 name`, `2 names`."""
    return f"{n} {word}" + ("s" if n != 1 else "")


def first_line(err: BaseException) -> str:
    """The first line of an exception's message, or its kind where it has none: the reason a diagnostic
    gives for a failure of JAX's or of the user's code."""
    return str(err).splitlines()[0] if str(err) else type(err).__name__


INTERNAL_REASON_LINES = 6        # of an MLIR/XLA message: its first line and the next ones as notes
INTERNAL_LINE_CHARS = 300


def internal_error(err: BaseException) -> Diagnostic:
    """E0601 for a failure arrc did not expect (an MLIR verifier or XLA error, a bug in arrc): the
    exception's kind and the first lines of its message (the reason), and a request to report it.

    >>> internal_error(ValueError("bad\\nworse")).message
    'internal compiler error: ValueError: bad'
    """
    lines = [line.strip()[:INTERNAL_LINE_CHARS] for line in str(err).strip().splitlines() if line.strip()]
    first = f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__
    notes = lines[1:INTERNAL_REASON_LINES]
    if len(lines) > INTERNAL_REASON_LINES:
        notes.append(f"... ({len(lines) - INTERNAL_REASON_LINES} more lines)")
    return Diagnostic("E0601", f"internal compiler error: {first}", None, notes=notes,
                      help="this is a bug in arrc, not in your program: please report it with the program, "
                           "the command line and the output of `arrc --version`")


def render_all(diags: list[Diagnostic], sources: dict[str, Source]) -> str:
    return "\n".join(render(d, sources) for d in diags)


def render_json(diags: list[Diagnostic]) -> str:
    return json.dumps({"diagnostics": [d.as_dict() for d in diags]}, indent=2)


class Reporter:
    """Collects the diagnostics of one compilation (all errors of a file in one run)."""

    def __init__(self, werror: bool = False):
        self.diagnostics: list[Diagnostic] = []
        self.werror = werror
        self.repeated: dict = {}     # (code, what) -> lines of the repeats counted in the first report's note

    def add(self, diag: Diagnostic) -> None:
        if diag.severity == "warning" and self.werror:
            diag.severity = "error"
            diag.notes.append("warnings are errors here (--werror)")
        if diag not in self.diagnostics:
            self.diagnostics.append(diag)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]
