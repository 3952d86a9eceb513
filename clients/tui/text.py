"""Terminal-cell arithmetic for the TUI: widths, truncation and wrapping (pure).

A terminal cell is not a character: CJK ideographs and most emoji take two cells,
combining marks take none. Everything the TUI draws is measured here with
prompt_toolkit's ``get_cwidth`` (wcwidth tables), so that a line never spills past the
right edge and the columns of a row line up whatever the labels are written in.
"""

from __future__ import annotations

import unicodedata

from prompt_toolkit.utils import get_cwidth

ELLIPSIS = "…"


def clean(text: str) -> str:
    """One displayable line: control characters (newlines, tabs, escapes) become spaces."""
    return "".join(" " if (ch in "\t\r\n" or unicodedata.category(ch) == "Cc") else ch for ch in text)


def cells(text: str) -> int:
    """How many terminal cells ``text`` occupies."""
    return sum(get_cwidth(ch) for ch in text)


def cut(text: str, width: int) -> str:
    """The longest prefix of ``text`` that fits in ``width`` cells (no ellipsis)."""
    out: list[str] = []
    used = 0
    for ch in text:
        w = get_cwidth(ch)
        if used + w > width:
            break
        out.append(ch)
        used += w
    return "".join(out)


def truncate(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` cells, ending in an ellipsis when it was cut."""
    if width <= 0:
        return ""
    if cells(text) <= width:
        return text
    return cut(text, width - 1).rstrip() + ELLIPSIS


def pad(text: str, width: int) -> str:
    """``text`` truncated or padded with spaces to exactly ``width`` cells."""
    text = truncate(text, width)
    return text + " " * (width - cells(text))


def hard_wrap(text: str, width: int) -> list[str]:
    """Split ``text`` into chunks of at most ``width`` cells, anywhere (for text being typed).

    Always returns at least one (possibly empty) chunk; the chunks joined give ``text``.
    """
    width = max(width, 2)
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    for ch in text:
        w = get_cwidth(ch)
        if used + w > width:
            chunks.append("".join(current))
            current, used = [], 0
        current.append(ch)
        used += w
    chunks.append("".join(current))
    return chunks


def wrap(text: str, width: int, max_lines: int | None = None) -> list[str]:
    """Word-wrap ``text`` to ``width`` cells per line.

    Breaks at spaces where it can, inside a word when a word alone is wider than a line
    (and between CJK characters, which have no spaces). Explicit newlines are kept. With
    ``max_lines`` the last kept line ends in an ellipsis when text was dropped.
    """
    width = max(width, 2)
    lines: list[str] = []
    for paragraph in text.replace("\r\n", "\n").split("\n"):
        paragraph = clean(paragraph).strip()
        if not paragraph:
            lines.append("")
            continue
        line = ""
        for word in paragraph.split(" "):
            if not word:
                continue
            candidate = f"{line} {word}" if line else word
            if cells(candidate) <= width:
                line = candidate
                continue
            if line:
                lines.append(line)
                line = ""
            if cells(word) <= width:
                line = word
            else:
                pieces = hard_wrap(word, width)
                lines.extend(pieces[:-1])
                line = pieces[-1]
        lines.append(line)
    while len(lines) > 1 and lines[-1] == "":
        lines.pop()
    if max_lines is not None and len(lines) > max_lines:
        lines = lines[: max(max_lines, 1)]
        lines[-1] = cut(lines[-1], width - 1).rstrip() + ELLIPSIS
    return lines
