"""Reading cells: where a cell ends, by its blocks, brackets and blank lines (the prompt's Enter and piped
scripts split cells the same way)."""
from __future__ import annotations

import re


def scan(text: str, depth: int = 0) -> tuple[int, list[str]]:
    """The bracket depth at the end of `text` (starting at `depth`) and its lines with comments removed
    (strings respected; a string ends at the end of its line, and one that does, unterminated, closes the
    brackets: the cell is a syntax error there, as in Python, not the start of the lines that follow)."""
    out, line, quote = [], [], None
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            line.append(ch)
            if ch == "\\" and i + 1 < len(text):
                line.append(text[i + 1])
                i += 1
            elif ch == quote or ch == "\n":
                quote = None
                if ch == "\n":
                    out.append("".join(line[:-1]))
                    line = []
                    depth = 0
        elif ch in "\"'":
            quote = ch
            line.append(ch)
        elif ch == "#":
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        elif ch == "\n":
            out.append("".join(line))
            line = []
        else:
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth = max(0, depth - 1)
            line.append(ch)
        i += 1
    out.append("".join(line))
    return (0 if quote else depth), out


def is_block(text: str) -> bool:
    """Does the cell open an indented block (`def ...:`, `for ...:`)?"""
    if text.lstrip().startswith(":"):
        return False
    return _opens_block(scan(text)[1])


def _opens_block(lines: list[str]) -> bool:
    return any(line.rstrip().endswith(":") for line in lines if line.strip())


def open_brackets(text: str) -> bool:
    return scan(text)[0] > 0


def is_complete(text: str) -> bool:
    """For the prompt: does Enter run the buffer? A block needs a blank last line, brackets must be closed."""
    if not text.strip() or text.lstrip().startswith(":"):
        return True
    if open_brackets(text):
        return False
    if is_block(text):
        return text.split("\n")[-1].strip() == "" and len(text.split("\n")) > 1
    return True


_CONTINUES = re.compile(r"(elif|else)\b")
_DEFINES = re.compile(r"(def|const|extern)\b")


class CellReader:
    """Splits lines into cells the way a script reads: a line is a cell unless it opens brackets or a
    block; a block goes on until a line at column 0 that does not continue it (`elif`, `else`) or the
    end of input; blank lines inside a block are kept. Definitions (`def`, `const`, `extern`) that follow
    each other are one cell, so that they may use each other in any order, as in a file."""

    def __init__(self):
        self.pending: list[str] = []
        self.depth = 0              # the bracket depth at the end of the pending lines
        self.block = False          # whether a pending line opens a block
        self.defines = False        # whether the pending lines are definitions
        # (kept line by line: rescanning the whole pending block for each line made a piped 8,000-line
        # `def` take 93 s)

    def _add(self, line: str) -> None:
        if not self.pending:
            self.defines = bool(_DEFINES.match(line))
        self.depth, lines = scan(line, self.depth if self.pending else 0)
        self.block = bool(self.pending) and self.block or _opens_block(lines)
        self.pending.append(line)

    def feed(self, line: str) -> list[str]:
        line = line.rstrip("\r\n")
        out: list[str] = []
        if self.pending:
            if self.depth > 0:
                self._add(line)
                if self.depth == 0 and not self.block:
                    out.append(self._flush())
                return out
            if line.strip() and not line[0].isspace() and not line.startswith("#") \
                    and not _CONTINUES.match(line) and not (self.defines and _DEFINES.match(line)):
                out.append(self._flush())
            else:
                self._add(line)
                return out
        if not line.strip() or line.lstrip().startswith("#"):
            return out
        self._add(line)
        if line.lstrip().startswith(":") or (self.depth == 0 and not self.block and not self.defines):
            out.append(self._flush())
        return out

    def close(self) -> list[str]:
        return [self._flush()] if self.pending else []

    def _flush(self) -> str:
        text = "\n".join(self.pending).rstrip()
        self.pending = []
        return text


def split_cells(text: str) -> list[str]:
    reader = CellReader()
    out: list[str] = []
    for line in text.split("\n"):
        out.extend(reader.feed(line))
    return out + reader.close()
