"""Terminal-cell arithmetic: CJK and emoji take two cells, and nothing spills past the edge."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from clients.tui.text import ELLIPSIS, cells, clean, cut, hard_wrap, pad, truncate, wrap


def test_cells_counts_wide_characters_twice() -> None:
    assert cells("abc") == 3
    assert cells("日本語") == 6
    assert cells("🎉") == 2
    assert cells("e\u0301") == 1  # a combining accent takes no cell


def test_truncate_keeps_short_text_and_marks_cut_text() -> None:
    assert truncate("Staging", 10) == "Staging"
    assert truncate("Production", 6) == "Produ" + ELLIPSIS
    assert truncate("日本語のラベル", 7) == "日本語" + ELLIPSIS
    assert cells(truncate("日本語のラベル", 7)) <= 7
    assert truncate("anything", 0) == ""


def test_cut_never_splits_a_wide_character() -> None:
    assert cut("日本", 3) == "日"
    assert cut("ab", 5) == "ab"


def test_pad_gives_exact_width() -> None:
    assert cells(pad("日本", 7)) == 7
    assert cells(pad("a very long label indeed", 7)) == 7


def test_clean_turns_control_characters_into_spaces() -> None:
    assert clean("a\tb\nc\x1b[31m") == "a b c [31m"


def test_wrap_breaks_at_spaces_and_inside_long_words() -> None:
    assert wrap("one two three", 7) == ["one two", "three"]
    assert wrap("abcdefghij", 4) == ["abcd", "efgh", "ij"]
    assert wrap("第一行\n第二行", 20) == ["第一行", "第二行"]


def test_wrap_with_max_lines_ends_in_an_ellipsis() -> None:
    lines = wrap("one two three four five six", 9, max_lines=2)
    assert len(lines) == 2
    assert lines[-1].endswith(ELLIPSIS)
    assert all(cells(line) <= 9 for line in lines)


def test_hard_wrap_round_trips_the_text() -> None:
    text = "Hello 世界 🎉 again"
    chunks = hard_wrap(text, 5)
    assert "".join(chunks) == text
    assert all(cells(chunk) <= 5 for chunk in chunks)


@given(st.text(max_size=300), st.integers(min_value=2, max_value=90))
def test_wrap_never_exceeds_the_width(text: str, width: int) -> None:
    for line in wrap(text, width, max_lines=5):
        assert cells(line) <= width


@given(st.text(max_size=200), st.integers(min_value=0, max_value=90))
def test_truncate_never_exceeds_the_width(text: str, width: int) -> None:
    assert cells(truncate(text, width)) <= width
