"""A terminal's screen as a picture: ``capture-pane -e`` output (ANSI colours) rendered to a
PNG with Pillow, for the docs' screenshots of the terminal client.

Fonts: DejaVu Sans Mono, plus, when installed, WenQuanYi Micro Hei (CJK) and Noto Color
Emoji (``apt-get install fonts-wqy-microhei fonts-noto-color-emoji``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.helpers.processes import need
from tests.helpers.terminal import HEIGHT, WIDTH

PALETTE16 = [
    (0x23, 0x26, 0x34),
    (0xE7, 0x82, 0x84),
    (0xA6, 0xD1, 0x89),
    (0xE5, 0xC8, 0x90),
    (0x8C, 0xAA, 0xEE),
    (0xF4, 0xB8, 0xE4),
    (0x81, 0xC8, 0xBE),
    (0xB5, 0xBF, 0xE2),
    (0x62, 0x68, 0x80),
    (0xE7, 0x82, 0x84),
    (0xA6, 0xD1, 0x89),
    (0xE5, 0xC8, 0x90),
    (0x8C, 0xAA, 0xEE),
    (0xF4, 0xB8, 0xE4),
    (0x81, 0xC8, 0xBE),
    (0xFF, 0xFF, 0xFF),
]
DEFAULT_FG = (0xC6, 0xD0, 0xF5)
DEFAULT_BG = (0x29, 0x2C, 0x3C)


def _xterm256(n: int) -> tuple[int, int, int]:
    if n < 16:
        return PALETTE16[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return steps[n // 36], steps[(n // 6) % 6], steps[n % 6]
    level = 8 + (n - 232) * 10
    return level, level, level


def parse_ansi(text: str, rows_shown: int = HEIGHT) -> list[list[tuple[str, dict[str, Any]]]]:
    """Lines of (character, attributes) from ``capture-pane -e`` output (SGR codes only)."""
    rows: list[list[tuple[str, dict[str, Any]]]] = []
    attrs: dict[str, Any] = {}
    for raw in text.split("\n")[:rows_shown]:
        row: list[tuple[str, dict[str, Any]]] = []
        pos = 0
        while pos < len(raw):
            match = re.match(r"\x1b\[([0-9;:]*)m", raw[pos:])
            if match:
                attrs = _sgr(attrs, match.group(1))
                pos += match.end()
                continue
            if raw[pos] == "\x1b":  # another escape sequence: skip it
                other = re.match(r"\x1b(\[[0-9;?]*[A-Za-z]|\][^\x07]*\x07|.)", raw[pos:])
                pos += other.end() if other else 1
                continue
            row.append((raw[pos], dict(attrs)))
            pos += 1
        rows.append(row)
    return rows


def _sgr(attrs: dict[str, Any], params: str) -> dict[str, Any]:
    attrs = dict(attrs)
    codes = [int(p) if p else 0 for p in params.replace(":", ";").split(";")] if params else [0]
    i = 0
    while i < len(codes):
        code = codes[i]
        if code == 0:
            attrs = {}
        elif code in (1, 2, 3, 4, 7):
            attrs[{1: "bold", 2: "dim", 3: "italic", 4: "underline", 7: "reverse"}[code]] = True
        elif code in (22, 23, 24, 27):
            for name in {22: ("bold", "dim"), 23: ("italic",), 24: ("underline",), 27: ("reverse",)}[code]:
                attrs.pop(name, None)
        elif 30 <= code <= 37 or 90 <= code <= 97:
            attrs["fg"] = PALETTE16[code - 30 if code < 90 else code - 82]
        elif 40 <= code <= 47 or 100 <= code <= 107:
            attrs["bg"] = PALETTE16[code - 40 if code < 100 else code - 92]
        elif code == 39:
            attrs.pop("fg", None)
        elif code == 49:
            attrs.pop("bg", None)
        elif code in (38, 48) and i + 1 < len(codes):
            key = "fg" if code == 38 else "bg"
            if codes[i + 1] == 5 and i + 2 < len(codes):
                attrs[key] = _xterm256(codes[i + 2])
                i += 2
            elif codes[i + 1] == 2 and i + 4 < len(codes):
                attrs[key] = tuple(codes[i + 2 : i + 5])
                i += 4
        i += 1
    return attrs


def render_png(ansi: str, path: Path, *, title: str, columns: int = WIDTH, rows: int = HEIGHT) -> Any:
    """Draw the captured screen (``columns`` x ``rows``) like a terminal window; CJK and
    emoji fonts when installed."""
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:
        need(False, "Pillow is not installed (pip install pillow) to render the TUI screenshot")
        raise
    from prompt_toolkit.utils import get_cwidth

    def font(*names: str, size: int, index: int = 0) -> Any:
        for name in names:
            for root in ("/usr/share/fonts/truetype", "/usr/share/fonts/opentype"):
                found = list(Path(root).rglob(name)) if Path(root).exists() else []
                if found:
                    return ImageFont.truetype(str(found[0]), size, index=index)
        return None

    size = 16
    regular = font("DejaVuSansMono.ttf", size=size) or ImageFont.load_default()
    bold = font("DejaVuSansMono-Bold.ttf", size=size) or regular
    oblique = font("DejaVuSansMono-Oblique.ttf", size=size) or regular
    wide = font("wqy-microhei.ttc", size=size, index=1) or font("NotoSansCJK-Regular.ttc", size=size)
    # Without a CJK font the picture would show boxes: better no new picture than a worse one.
    need(wide is not None, "fonts-wqy-microhei is not installed (CJK glyphs for the screenshot)")
    emoji = font("NotoColorEmoji.ttf", size=109)  # optional: the screenshot shows no emoji
    cell_w = round(regular.getlength("M"))
    cell_h = round(size * 1.4)
    pad, bar = 18, 34
    width = columns * cell_w + 2 * pad
    height = rows * cell_h + 2 * pad + bar
    image = Image.new("RGB", (width, height), (0x1E, 0x20, 0x2B))
    draw = ImageDraw.Draw(image)
    # A window frame: title bar with the three familiar dots.
    draw.rounded_rectangle((0, 0, width - 1, height - 1), radius=12, fill=DEFAULT_BG, outline=(0x44, 0x48, 0x5C))
    draw.rounded_rectangle((0, 0, width - 1, bar + 10), radius=12, fill=(0x1E, 0x20, 0x2B))
    draw.rectangle((0, bar, width - 1, bar + 10), fill=DEFAULT_BG)
    for i, colour in enumerate([(0xE7, 0x82, 0x84), (0xE5, 0xC8, 0x90), (0xA6, 0xD1, 0x89)]):
        x = 18 + i * 22
        draw.ellipse((x, bar // 2 - 6, x + 12, bar // 2 + 6), fill=colour)
    title_w = regular.getlength(title)
    draw.text(((width - title_w) / 2, bar // 2 - size // 2 - 1), title, font=regular, fill=(0x83, 0x8B, 0xA7))
    top = bar + pad
    for y, row in enumerate(parse_ansi(ansi, rows)):
        col = 0
        for ch, attrs in row:
            w = max(0, get_cwidth(ch))
            if w == 0:
                continue
            fg = attrs.get("fg", DEFAULT_FG)
            bg = attrs.get("bg")
            if attrs.get("reverse"):
                fg, bg = bg or DEFAULT_BG, fg
            x0, y0 = pad + col * cell_w, top + y * cell_h
            if bg is not None:
                draw.rectangle((x0, y0, x0 + w * cell_w - 1, y0 + cell_h - 1), fill=tuple(bg))
            if attrs.get("dim"):
                fg = tuple((c + b) // 2 for c, b in zip(fg, DEFAULT_BG, strict=True))
            if ch != " ":
                baseline = y0 + (cell_h - size) // 2 - 1
                if w == 2 and emoji is not None and not _is_cjk(ch):
                    glyph = Image.new("RGBA", (136, 128), (0, 0, 0, 0))
                    ImageDraw.Draw(glyph).text((0, 0), ch, font=emoji, embedded_color=True)
                    box = glyph.getbbox()
                    if box:
                        glyph = glyph.crop(box)
                        scale = (size + 2) / max(glyph.size)
                        glyph = glyph.resize(
                            (max(1, round(glyph.size[0] * scale)), max(1, round(glyph.size[1] * scale))),
                            Image.Resampling.LANCZOS,
                        )
                        image.paste(
                            glyph, (x0 + (2 * cell_w - glyph.size[0]) // 2, y0 + (cell_h - glyph.size[1]) // 2), glyph
                        )
                else:
                    face = (
                        wide
                        if (w == 2 and wide is not None)
                        else (bold if attrs.get("bold") else oblique if attrs.get("italic") else regular)
                    )
                    if ch in "─│┌┐└┘":
                        _box_char(draw, ch, x0, y0, cell_w, cell_h, tuple(fg))
                    else:
                        # Centre the glyph in its cell(s): CJK fonts are narrower than 2 cells.
                        dx = max(0, (w * cell_w - round(face.getlength(ch))) // 2)
                        draw.text((x0 + dx, baseline), ch, font=face, fill=tuple(fg))
            if attrs.get("underline"):
                draw.line((x0, y0 + cell_h - 3, x0 + w * cell_w - 1, y0 + cell_h - 3), fill=tuple(fg))
            col += w
    image.save(path, optimize=True)
    return image


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return (
        0x1100 <= code <= 0x11FF
        or 0x2E80 <= code <= 0xA4CF
        or 0xAC00 <= code <= 0xD7A3
        or 0xF900 <= code <= 0xFAFF
        or 0xFF00 <= code <= 0xFF60
        or 0x20000 <= code <= 0x3FFFD
    )


def _box_char(draw: Any, ch: str, x: int, y: int, w: int, h: int, fill: tuple[int, ...]) -> None:
    """Box-drawing lines reach the cell edges, so frames join up at any line height."""
    cx, cy = x + w // 2, y + h // 2
    right, down = ch in "─┌└", ch in "│┌┐"
    left, up = ch in "─┐┘", ch in "│└┘"
    if left:
        draw.line((x, cy, cx, cy), fill=fill)
    if right:
        draw.line((cx, cy, x + w, cy), fill=fill)
    if up:
        draw.line((cx, y, cx, cy), fill=fill)
    if down:
        draw.line((cx, cy, cx, y + h), fill=fill)
