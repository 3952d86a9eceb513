"""Node programs the tests drive (Pi, ...), installed from a lockfile in this repository.

``npm_install(folder)`` runs ``npm ci`` on ``folder``'s ``package.json`` and
``package-lock.json`` into a cache outside the work tree, keyed by the lockfile's hash, and
returns the installed ``node_modules``. The first run needs the npm registry; every later
run (and every test after the first) reuses the cache, so the suite works offline once it
has run. Install scripts are not run: none gets to download a binary. (Claude Code's only
copies its native program out of a platform package the lockfile already installs; the
tests run that program where it lies, ``tests/helpers/claude_code.py``. Codex's native
program is an optional dependency of its own, one per platform in the lockfile; ``npm ci``
installs this machine's, and its launcher finds it there.)

A missing ``node``/``npm`` or a failed install is a skip (``need``), a failure under
QBROKER_REQUIRE_ALL=1. ``.ci/run`` fills the cache beforehand with
``python -m tests.helpers.npm clients/pi tests/tools/...``.

The cache lives in ``$QBROKER_NPM_CACHE``, else ``$XDG_CACHE_HOME/qbroker/npm``, else
``~/.cache/qbroker/npm``. Concurrent test runs take a file lock; an install lands by an
atomic rename, so a half-installed tree is never used.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.helpers.processes import REPO_ROOT, need

INSTALL_TIMEOUT = 600.0  # seconds; a cold install of Pi takes ~10-30 s


def node_version() -> tuple[int, int] | None:
    """The installed Node.js's (major, minor), or None without one."""
    node = shutil.which("node")
    if node is None:
        return None
    out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    match = re.match(r"v(\d+)\.(\d+)", out)
    return (int(match.group(1)), int(match.group(2))) if match else None


def cache_root() -> Path:
    explicit = os.environ.get("QBROKER_NPM_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "qbroker" / "npm"


def npm_install(folder: Path, *, node_at_least: tuple[int, int] = (20, 6)) -> Path:
    """``npm ci`` of ``folder``'s lockfile, cached; returns the installed ``node_modules``."""
    version = node_version()
    need(version is not None, "node is not installed")
    assert version is not None
    need(
        version >= node_at_least,
        f"node {version[0]}.{version[1]} is older than the {node_at_least[0]}.{node_at_least[1]} {folder.name} needs",
    )
    npm = shutil.which("npm")
    need(npm is not None, "npm is not installed")
    assert npm is not None
    manifest, lock = folder / "package.json", folder / "package-lock.json"
    digest = hashlib.sha256(manifest.read_bytes() + b"\0" + lock.read_bytes()).hexdigest()[:16]
    target = cache_root() / f"{folder.name}-{digest}"
    modules = target / "node_modules"
    if (target / ".complete").exists():
        return modules
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)  # another test run may be installing the same
        if (target / ".complete").exists():
            return modules
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        try:
            shutil.copy2(manifest, staging / "package.json")
            shutil.copy2(lock, staging / "package-lock.json")
            result = subprocess.run(
                [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=staging,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT,
                stdin=subprocess.DEVNULL,
            )
            if result.returncode != 0:
                need(False, f"npm ci for {folder.relative_to(REPO_ROOT)} failed: {result.stderr.strip()[-2000:]}")
            (staging / ".complete").write_text(digest)
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return modules


def main(argv: list[str]) -> int:
    """``python -m tests.helpers.npm FOLDER...``: fill the cache (what ``.ci/run`` does)."""
    for name in argv:
        print(npm_install((REPO_ROOT / name).resolve()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
