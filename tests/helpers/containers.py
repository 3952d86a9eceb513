"""Podman for the container tests: a Debian base image made with mmdebstrap, the images built
on it (qbroker's from deploy/Dockerfile; Redis and nginx from Debian's packages, standing in
for the official images no registry here serves), and docker-compose.yml brought up with
podman-compose.

No image registry is reachable, so everything starts from Debian's packages. The base is
the slow part (mmdebstrap, a minute or more): it is kept in podman's image store under a tag
naming the hash of its recipe (suite, packages, the apt sources, the machine's CA
certificates), so it is built once per recipe; the Redis and nginx images likewise, keyed by
the base and their Containerfile. qbroker's image is built every time, on podman's layer cache
(its dependencies are a layer of their own).

Containers land outside the test's process tree: ``compose_project`` removes its
containers, network and volume by name however the test ends.

``python -m tests.helpers.containers`` builds the cached images ahead of the suite (.ci/run).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.processes import REPO_ROOT, need

SUITE = "bookworm"
# python3-venv brings pip's wheel for the image's venv; the base itself gets no pip.
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates")
APT_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
# HTTPS from inside a build goes through this machine's intercepting proxy: its CA
# certificates go into the base, so that pip and apt work in `podman build`.
MACHINE_CAS = Path("/usr/local/share/ca-certificates")
CONTAINERFILES = REPO_ROOT / "tests" / "containers"
BROKER_IMAGE = "localhost/qbroker-test:latest"
PROGRAMS = ("podman", "runc", "mmdebstrap", "podman-compose")
BUILD_TIMEOUT = 900.0  # a cold base and a cold dependency layer, on a loaded machine


def need_podman() -> None:
    """Skip (or fail under QBROKER_REQUIRE_ALL=1) without podman, runc, mmdebstrap and podman-compose."""
    missing = [program for program in PROGRAMS if shutil.which(program) is None]
    need(not missing, f"{', '.join(missing)} not installed (apt-get install podman runc mmdebstrap podman-compose)")


def podman(*args: str, timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``podman args...``; its output, or an AssertionError carrying podman's words."""
    done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert done.returncode == 0, f"podman {' '.join(args)}: {done.stderr[-3000:]}"
    return done


def _image_exists(tag: str) -> bool:
    return podman("image", "exists", tag, check=False).returncode == 0


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _customize_hook() -> str:
    """The mmdebstrap hook that trusts the machine's CA certificates inside the base."""
    return (
        'mkdir -p "$1/usr/local/share/ca-certificates"'
        f' && cp {MACHINE_CAS}/*.crt "$1/usr/local/share/ca-certificates/"'
        ' && chroot "$1" update-ca-certificates'
    )


def _machine_cas() -> list[Path]:
    return sorted(MACHINE_CAS.glob("*.crt")) if MACHINE_CAS.is_dir() else []


def base_recipe() -> str:
    """Everything that makes the base what it is; its hash is the base's tag."""
    recipe = {
        "suite": SUITE,
        "variant": "minbase",
        "packages": BASE_PACKAGES,
        "sources": APT_SOURCES.read_text() if APT_SOURCES.exists() else "",
        "cas": {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in _machine_cas()},
        "hook": _customize_hook() if _machine_cas() else "",
    }
    return json.dumps(recipe, sort_keys=True)


def base_image() -> str:
    """The Debian base (its tag), made with mmdebstrap and ``podman import`` unless the store
    already holds the one of this recipe."""
    tag = f"localhost/qbroker-test-base:{_digest(base_recipe())}"
    if _image_exists(tag):
        return tag
    with tempfile.TemporaryDirectory(prefix="qbroker-base-") as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        command = ["mmdebstrap", "--quiet", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}"]
        if _machine_cas():
            command.append(f"--customize-hook={_customize_hook()}")
        command += [SUITE, str(rootfs)]
        if APT_SOURCES.exists():
            command.append(str(APT_SOURCES))
        made = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
        assert made.returncode == 0, f"mmdebstrap failed: {made.stderr[-3000:]}"
        podman("import", "--change", 'CMD ["/bin/bash"]', str(rootfs), tag, timeout=300)
    return tag


def build(tag: str, containerfile: Path, context: Path, **build_args: str) -> str:
    """``podman build`` in Docker's format (OCI drops HEALTHCHECK), on the layer cache."""
    args = ["build", "--format", "docker", "--layers", "-q", "-f", str(containerfile), "-t", tag]
    for name, value in build_args.items():
        args += ["--build-arg", f"{name}={value}"]
    podman(*args, str(context), timeout=BUILD_TIMEOUT)
    return tag


def debian_image(name: str, base: str) -> str:
    """The stand-in for an official image, from tests/containers/<name>.Containerfile,
    built once per base and Containerfile."""
    containerfile = CONTAINERFILES / f"{name}.Containerfile"
    tag = f"localhost/qbroker-test-{name}:{_digest(base, containerfile.read_text())}"
    if not _image_exists(tag):
        build(tag, containerfile, CONTAINERFILES, BASE=base)
    return tag


def broker_image(base: str) -> str:
    """qbroker's image from deploy/Dockerfile on ``base``, from this tree's code; the one it
    replaces is removed (with its layers no other image uses), so runs do not pile up."""
    before = podman("image", "inspect", "--format", "{{.Id}}", BROKER_IMAGE, check=False).stdout.strip()
    build(BROKER_IMAGE, REPO_ROOT / "deploy" / "Dockerfile", REPO_ROOT, BASE=base)
    after = podman("image", "inspect", "--format", "{{.Id}}", BROKER_IMAGE).stdout.strip()
    if before and before != after:
        podman("rmi", before, check=False)
    return BROKER_IMAGE


@dataclass(frozen=True)
class Images:
    broker: str
    redis: str
    nginx: str


def images() -> Images:
    base = base_image()
    return Images(broker=broker_image(base), redis=debian_image("redis", base), nginx=debian_image("nginx", base))


@dataclass(frozen=True)
class Project:
    """A compose project that is up: its name, its published port, its containers' names."""

    name: str
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def container(self, service: str, number: int = 1) -> str:
        return f"{self.name}_{service}_{number}"


@contextlib.contextmanager
def compose_project(name: str, port: int, environment: dict[str, str]) -> Iterator[Project]:
    """docker-compose.yml (and the nginx.conf it mounts) up under podman-compose as project
    ``name``, in a directory of its own (no .env of the developer's leaks in); removed by name
    at the end, whatever happened."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QBROKER_")}
    env.update(environment, QBROKER_PUBLISHED_PORT=str(port))
    with tempfile.TemporaryDirectory(prefix="qbroker-compose-") as tmp:
        directory = Path(tmp)
        shutil.copy(REPO_ROOT / "docker-compose.yml", directory)
        (directory / "deploy").mkdir()
        shutil.copy(REPO_ROOT / "deploy" / "nginx.conf", directory / "deploy")
        try:
            up = subprocess.run(
                ["podman-compose", "-p", name, "up", "-d", "--no-build"],
                cwd=directory,
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
            )
            assert up.returncode == 0, f"podman-compose up failed: {up.stdout[-2000:]}{up.stderr[-2000:]}"
            yield Project(name, port)
        finally:
            remove_project(name)


def remove_project(name: str) -> None:
    """Every container, the network and the volume of compose project ``name``."""
    listed = podman("ps", "-a", "--filter", f"label=io.podman.compose.project={name}", "--format", "{{.Names}}")
    containers = listed.stdout.split()
    if containers:
        podman("rm", "--force", "--time", "0", *containers, check=False)
    podman("network", "rm", "--force", f"{name}_default", check=False)
    podman("volume", "rm", "--force", f"{name}_redis-data", check=False)


if __name__ == "__main__":  # .ci/run: the cached images before the suite (and their time)
    built = images()
    print(f"base {base_image()}, redis {built.redis}, nginx {built.nginx}, broker {built.broker}")
