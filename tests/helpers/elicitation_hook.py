"""Claude Code's ``Elicitation`` hook for tests: answers each form an MCP server asks in
print mode, as a scripted person would.

    python tests/helpers/elicitation_hook.py FOLDER

``FOLDER/replies.json`` is a list of replies, one per form, in order: each an
``{"action": "accept" | "decline" | "cancel", "content": {...}}`` with, optionally,
``"waitFor": NAME`` (answer only once ``FOLDER/NAME`` exists, at most ``WAIT_LIMIT``
seconds: a person who answers late). Every form the hook is given (its standard input, the
JSON Claude Code passes) is appended to ``FOLDER/forms.jsonl``. With no reply left the hook
answers ``cancel``. Its output is the hook's JSON answer on stdout.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

WAIT_LIMIT = 60.0


def main(folder: Path) -> int:
    given = json.loads(sys.stdin.read() or "{}")
    with open(folder / "forms.jsonl", "a") as forms:
        forms.write(json.dumps(given) + "\n")
    answered = len((folder / "forms.jsonl").read_text().splitlines()) - 1
    replies = json.loads((folder / "replies.json").read_text())
    reply = replies[answered] if answered < len(replies) else {"action": "cancel"}
    waiting_for = reply.get("waitFor")
    if waiting_for:
        deadline = time.monotonic() + WAIT_LIMIT
        while not (folder / waiting_for).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    output = {"hookEventName": "Elicitation", "action": reply["action"]}
    if "content" in reply:
        output["content"] = reply["content"]
    print(json.dumps({"hookSpecificOutput": output}))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
