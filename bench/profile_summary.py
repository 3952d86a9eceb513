"""Summarize py-spy ``--format raw`` profiles (collapsed stacks): where the broker spends its time.

    python bench/profile_summary.py PROFILE.txt [...] [--top 15]

Prints the busy samples, then the functions with the most *self* time (the frame on top of
the stack) and with the most *inclusive* time (anywhere on the stack, counted once per
sample), each as a share of the busy samples. Line numbers are dropped so one function
is one row. py-spy records only non-idle samples by default, so the shares are of CPU time.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

_LINE = re.compile(r":\d+\)$")


def _name(frame: str) -> str:
    frame = _LINE.sub(")", frame.strip())
    frame = re.sub(r"\(.*site-packages/", "(", frame)
    return re.sub(r"\(.*?/lib/python3\.\d+/", "(", frame)


def summarize(paths: list[Path]) -> tuple[int, Counter[str], Counter[str]]:
    total = 0
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for path in paths:
        for line in path.read_text(errors="replace").splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            frames = [_name(f) for f in stack.split(";") if f]
            if not frames:
                continue
            total += count
            own[frames[-1]] += count
            for name in set(frames):
                inclusive[name] += count
    return total, own, inclusive


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profiles", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--match", default="", help="only inclusive rows whose name contains this (e.g. broker/)")
    args = parser.parse_args()
    total, own, inclusive = summarize(args.profiles)
    if not total:
        print("no samples", file=sys.stderr)
        return 1
    print(f"{total} busy samples in {len(args.profiles)} profile(s)\n\nself time:")
    for name, count in own.most_common(args.top):
        print(f"  {100 * count / total:5.1f}%  {name}")
    print("\ninclusive time:")
    rows = [(n, c) for n, c in inclusive.most_common() if args.match in n and c < total]
    for name, count in rows[: args.top]:
        print(f"  {100 * count / total:5.1f}%  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
