"""The secret a broker generates when none is configured: made once, whole, and shared by every
process that starts on the same data dir at the same moment."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

from broker.runtime.config import Config
from tests.helpers.processes import REPO_ROOT


def test_a_configured_secret_is_used_and_no_file_is_made(tmp_path: Path) -> None:
    config = Config(secret="configured-secret-0123456789abcdef", data_dir=tmp_path / "data")
    assert config.secret_or_file() == "configured-secret-0123456789abcdef"
    assert not (tmp_path / "data").exists()


def test_the_generated_secret_is_kept_private_and_reused(tmp_path: Path) -> None:
    config = Config(data_dir=tmp_path / "data")
    first = config.secret_or_file()
    assert len(first) >= 32
    assert stat.S_IMODE(os.stat(config.secret_file).st_mode) == 0o600
    assert config.secret_or_file() == first == config.secret_file.read_text().strip()
    assert os.listdir(tmp_path / "data") == ["secret"]  # nothing left aside


def test_threads_starting_at_once_share_one_secret(tmp_path: Path) -> None:
    config = Config(data_dir=tmp_path)
    start = threading.Barrier(16)
    got: list[str] = []

    def read() -> None:
        start.wait()
        got.append(config.secret_or_file())

    threads = [threading.Thread(target=read) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(got) == 16 and len(set(got)) == 1
    assert os.listdir(tmp_path) == ["secret"]


def test_processes_starting_at_once_share_one_secret(tmp_path: Path) -> None:
    """As two brokers started together on a fresh data dir (one used to fail: 'File exists')."""
    # A barrier without polling: each child says it is ready, then blocks reading a pipe
    # whose write end the parent closes once all are ready, releasing them together.
    code = (
        "import os, sys; from pathlib import Path; from broker.runtime.config import Config\n"
        "print('ready', flush=True)\n"
        "os.read(int(sys.argv[2]), 1)\n"
        "print(Config(data_dir=Path(sys.argv[1])).secret_or_file())\n"
    )
    release, hold = os.pipe()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    try:
        children = [
            subprocess.Popen(
                [sys.executable, "-c", code, str(tmp_path / "data"), str(release)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                pass_fds=(release,),
            )
            for _ in range(8)
        ]
        for child in children:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    finally:
        os.close(release)
        os.close(hold)  # every child's read returns now
    outputs = [child.communicate(timeout=60) for child in children]
    assert all(child.returncode == 0 for child in children), [err for _, err in outputs]
    assert len({out.strip() for out, _ in outputs}) == 1
    assert os.listdir(tmp_path / "data") == ["secret"]
