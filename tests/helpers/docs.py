"""Transcripts that tests write into the docs: a fenced block between two HTML comments."""

from __future__ import annotations

from pathlib import Path


def replace_block(path: Path, start: str, end: str, text: str) -> None:
    """Put ``text`` as a ```text block between the markers ``start`` and ``end`` of ``path``."""
    doc = path.read_text(encoding="utf-8")
    first, last = doc.index(start), doc.index(end)
    block = f"{start}\n```text\n{text}```\n{end}"
    path.write_text(doc[:first] + block + doc[last + len(end) :], encoding="utf-8")


def has_one_place(path: Path, start: str, end: str) -> bool:
    doc = path.read_text(encoding="utf-8")
    return doc.count(start) == 1 and doc.count(end) == 1 and doc.index(start) < doc.index(end)
