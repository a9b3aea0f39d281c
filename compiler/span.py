"""Source text and spans: one span type for the whole compiler."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Source:
    """A source file: its name and its text."""
    name: str
    text: str

    def __post_init__(self):
        # A file name that is not UTF-8 reaches Python with lone surrogates ("bad\udcff.arr"), which MLIR's
        # locations cannot hold: spelled out as escapes, as the diagnostics print it.
        object.__setattr__(self, "name", self.name.encode("utf-8", "backslashreplace").decode())

    def line_text(self, line: int) -> str:
        """Line `line` (1-based) without its line end: the lexer counts only \n as a line break, and \r\n
        as one."""
        lines = self.text.split("\n")
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        return text[:-1] if text.endswith("\r") else text


@dataclass(frozen=True)
class Span:
    """A region of a source file; lines and columns are 1-based, end inclusive of its last column + 1."""
    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    def to(self, other: "Span") -> "Span":
        return Span(self.file, self.line, self.col, other.end_line, other.end_col)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "col": self.col,
                "end_line": self.end_line, "end_col": self.end_col}


def span_field():
    """A dataclass field for spans that takes no part in equality (parser tests compare structure)."""
    return field(default=None, compare=False, repr=False)
