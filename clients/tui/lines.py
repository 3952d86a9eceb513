"""Styled lines: the (style, text) fragments prompt_toolkit draws, measured in terminal cells.

Every screen line is built as a list of fragments; these helpers measure, centre and clip
one, so that no line is wider than the terminal whatever script its text is in (``text.py``
does the same for plain text).
"""

from __future__ import annotations

from clients.tui.text import cells, truncate

Fragment = tuple[str, str]
Line = list[Fragment]


def line_width(line: Line) -> int:
    """How many terminal cells ``line`` occupies."""
    return sum(cells(text) for _, text in line)


def center(line: Line, width: int) -> Line:
    return [("", " " * max(0, (width - line_width(line)) // 2))] + line


def fit(line: Line, width: int) -> Line:
    """Clip a line to ``width`` cells (the last visible fragment ends in an ellipsis)."""
    out: Line = []
    used = 0
    for style, text in line:
        w = cells(text)
        if used + w <= width:
            out.append((style, text))
            used += w
            continue
        room = width - used
        if room > 0:
            out.append((style, truncate(text, room)))
        break
    return out


def help_line(keys: list[tuple[str, str]], width: int) -> Line:
    """The bottom line: each (key, what it does), as many as fit in ``width`` in order."""
    line: Line = [("class:help", " ")]
    for key, what in keys:
        piece = [("class:help.key", key), ("class:help", f" {what}   ")]
        if line_width(line) + line_width(piece) > width:
            break
        line += piece
    return line


def seconds_left(deadline: float | None, now: float) -> int:
    """Whole seconds until ``deadline`` (rounded up, so a countdown shows 1 until it ends)."""
    if deadline is None:
        return 0
    return max(0, int(deadline - now + 0.999))
