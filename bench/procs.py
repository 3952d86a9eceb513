"""The bench's processes and the machine they run on (a library of bench/run.py).

Free ports, the processes the bench starts (redis-server, brokers) and stops, what /proc
says about them (CPU time, resident memory, the machine's busy and stolen time), and the
machine line of a report. Every process started here talks to 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import os
import platform
import resource
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
SECRET = "qbroker-bench-secret-0123456789abcdef"
TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` in seconds (0 when it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def machine_busy() -> tuple[float, float, float]:
    """(busy, total, steal) jiffies of the whole machine, from /proc/stat. Steal is time the
    hypervisor gave this VM's cores to someone else; it counts as busy (we could not use it)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(values[:8])
    steal = values[7] if len(values) > 7 else 0
    return total - idle, total, steal


def steal_share(before: tuple[float, float, float], after: tuple[float, float, float]) -> float | None:
    """The share of the cores' time the hypervisor took between two ``machine_busy`` readings."""
    total = after[1] - before[1]
    return (after[2] - before[2]) / total if total > 0 else None


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QBROKER_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["QBROKER_SECRET"] = SECRET
    env.update(extra)
    return env


def wait_port(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(0.2)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


def stop(process: subprocess.Popen[Any] | None, timeout: float = 15.0) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


@contextlib.contextmanager
def redis_server(replica: bool = False) -> Iterator[str | None]:
    """A redis-server of our own (its URL; None without redis-server), with ``replica``
    a replica of it beside it, in sync before the URL is given (for WAIT 1)."""
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="qbroker-bench-redis-") as tmp:
        started: list[subprocess.Popen[bytes]] = []
        try:
            for extra in ([], ["--replicaof", "127.0.0.1", str(port)])[: 2 if replica else 1]:
                own = port if not extra else free_port()
                started.append(
                    subprocess.Popen(
                        [binary, "--port", str(own), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
                        + ["--dir", tmp, "--dbfilename", f"dump-{own}.rdb", *extra],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
                if not wait_port(own, 10):
                    raise RuntimeError("redis-server did not start")
            if replica and not _replica_online(port, 30):
                raise RuntimeError("the replica did not come in sync")
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            for process in reversed(started):
                stop(process)


def _replica_online(port: int, timeout: float) -> bool:
    import redis

    deadline = time.monotonic() + timeout
    with redis.Redis(port=port) as client:
        while time.monotonic() < deadline:
            if "online" in str(client.info("replication").get("slave0", {})):
                return True
            time.sleep(0.1)
    return False


@dataclass
class Broker:
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid


@contextlib.contextmanager
def brokers(
    count: int,
    redis_url: str | None,
    wrap: Callable[[int], list[str]] | None = None,
    ready_within: float = 30,
    settings: dict[str, str] | None = None,
) -> Iterator[list[Broker]]:
    """``count`` brokers (sharing ``redis_url``, or one on the memory store); ``wrap(i)`` is
    a command the i-th broker runs under (a profiler), ``[]`` for none; ``settings``: more
    QBROKER_* variables."""
    started: list[Broker] = []
    with tempfile.TemporaryDirectory(prefix="qbroker-bench-") as tmp:
        try:
            for i in range(count):
                port = free_port()
                env = child_env(
                    QBROKER_DATA_DIR=tmp,
                    QBROKER_LOG_LEVEL="warning",
                    # Bots answer without thinking: lift the per-connection rate limit.
                    QBROKER_RATE_LIMIT="1000000",
                    QBROKER_RATE_BURST="1000000",
                    QBROKER_CLIENT_WAIT="30",
                )
                if redis_url:
                    env["QBROKER_REDIS_URL"] = redis_url
                env.update(settings or {})
                log = Path(tmp) / f"broker-{i}.log"
                with open(log, "wb") as out:
                    process = subprocess.Popen(
                        [*(wrap(i) if wrap else []), PY, "-m", "qbroker.cli", "serve", "--host", "127.0.0.1"]
                        + ["--port", str(port)],
                        env=env,
                        cwd=REPO,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                broker = Broker(port, process, log)
                started.append(broker)
                if not _ready(broker, ready_within):
                    raise RuntimeError(f"broker did not become ready:\n{log.read_text(errors='replace')[-3000:]}")
            yield started
        finally:
            for broker in started:
                stop(broker.process)


def _ready(broker: Broker, timeout: float) -> bool:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if broker.process.poll() is not None:
            return False
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{broker.url}/readyz", timeout=1).status_code == 200:
                return True
        time.sleep(0.1)
    return False


def describe_machine() -> dict[str, str]:
    model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) // 1024} MiB"
    versions = {}
    for module in ("websockets", "uvicorn", "redis", "uvloop", "httptools"):
        with contextlib.suppress(Exception):
            from importlib.metadata import version

            versions[module] = version(module)
    redis_version = ""
    if shutil.which("redis-server"):
        with contextlib.suppress(Exception):
            redis_version = (
                subprocess.run(["redis-server", "--version"], capture_output=True, text=True, timeout=10)
                .stdout.split()[2]
                .removeprefix("v=")
            )
    return {
        "nproc": str(os.cpu_count()),
        "cpu": model,
        "memory": mem,
        "kernel": platform.release(),
        "python": f"{platform.python_version()} ({_interpreter_build()})",
        "packages": ", ".join(f"{k} {v}" for k, v in versions.items()),
        "redis-server": redis_version or "not installed",
    }


def _interpreter_build() -> str:
    """Which Python runs the bench, and so every process it starts. Its build matters: the
    same broker code took 13-16% more CPU per questionnaire on a build without profile-guided
    optimization, measured on 2026-12-03 on an Intel Xeon VM (docs/benchmarks.md, "Which
    Python"). A distribution's build may be optimized without saying so in its configure
    arguments, so only the arguments that say it are named."""
    args = str(sysconfig.get_config_var("CONFIG_ARGS") or "")
    flags = [flag for flag in ("--enable-optimizations", "--with-lto") if flag in args]
    build = ", ".join(platform.python_build())
    return f"{sys.executable}; {build}; {platform.python_compiler()}" + (f"; {' '.join(flags)}" if flags else "")


def raise_nofile(want: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else want
    target = max(soft, min(target, max(want, soft)))
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
