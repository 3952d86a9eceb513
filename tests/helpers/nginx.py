"""deploy/nginx.conf run by a real nginx in front of real brokers, for the load-balancer tests.

The config is deploy/nginx.conf itself with only what must change on a test machine
rewritten: the upstream's one ``server broker:8700`` line (every compose broker answers to
that name) becomes one line per broker's 127.0.0.1 port, the listen address becomes
127.0.0.1:<free port>, and temp paths move into a temporary directory. ``nginx -t`` checks
it before nginx serves it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.processes import REPO_ROOT, free_port, need, port_open
from tests.helpers.waiting import wait_until

DEPLOY_CONF = REPO_ROOT / "deploy" / "nginx.conf"
UPSTREAM = re.compile(r"^(\s*server )broker:8700\b([^\n]*\n)", re.MULTILINE)


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)


def local_conf(text: str, broker_ports: list[int], listen_port: int, tmp: Path) -> str:
    """deploy/nginx.conf for this machine: same directives, local addresses and temp paths."""
    (upstream,) = UPSTREAM.findall(text)
    assert broker_ports, "no brokers"
    prefix, rest = upstream
    servers = "".join(f"{prefix}127.0.0.1:{port}{rest}" for port in broker_ports)
    text = UPSTREAM.sub(lambda _: servers, text)
    assert text.count("listen 8080;") == 1
    text = text.replace("listen 8080;", f"listen 127.0.0.1:{listen_port};")
    temp = "".join(
        f"    {kind}_temp_path {tmp / kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    assert text.count("http {\n") == 1
    return text.replace("http {\n", "http {\n" + temp, 1)


@contextlib.contextmanager
def nginx(broker_ports: list[int]) -> Iterator[str]:
    binary = nginx_binary()
    need(binary is not None, "nginx is not installed (apt-get install nginx-light)")
    assert binary is not None
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="qbroker-nginx-") as tmp_name:
        tmp = Path(tmp_name)
        tmp.chmod(0o755)  # nginx workers may run as another user
        conf = tmp / "nginx.conf"
        conf.write_text(local_conf(DEPLOY_CONF.read_text(), broker_ports, port, tmp))
        args = [
            binary,
            "-p",
            f"{tmp}/",
            "-c",
            str(conf),
            "-e",
            str(tmp / "error.log"),
            "-g",
            f"daemon off; pid {tmp / 'nginx.pid'};",
        ]
        checked = subprocess.run([*args, "-t"], capture_output=True, text=True, timeout=30)
        assert checked.returncode == 0, checked.stderr
        with open(tmp / "stdout.log", "wb") as out:
            process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: process.poll() is not None or port_open(port), what="nginx to listen")
            assert process.poll() is None, (tmp / "error.log").read_text()
            yield f"127.0.0.1:{port}"
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
