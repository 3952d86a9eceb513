"""The broker on a Redis that takes TLS only and a password (``rediss://``), as the compose
file and the k8s manifests can be set to run it: a local ``redis-server --port 0
--tls-port`` with a CA and a server certificate this test makes. A questionnaire goes
through it, and a broker that does not trust the CA, or has no password, cannot start."""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.helpers.clients import person
from tests.helpers.processes import REPO_ROOT, broker, broker_env, free_port, need, port_open
from tests.helpers.protocol import Agent
from tests.helpers.samples import new_sid, single
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.redis

PASSWORD = "tls-test-password-0123"


@dataclass
class TlsRedis:
    port: int
    ca: Path

    def url(self, password: str | None = PASSWORD, ca: Path | None = None) -> str:
        auth = f":{password}@" if password else ""
        return f"rediss://{auth}127.0.0.1:{self.port}/0?ssl_ca_certs={ca or self.ca}"


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A CA, and a certificate for 127.0.0.1 signed by it: (ca.pem, server.pem, server.key)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("qbroker test CA"))
        .issuer_name(_name("qbroker test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


@pytest.fixture(scope="module")
def tls_redis() -> Iterator[TlsRedis]:
    binary = shutil.which("redis-server")
    need(binary is not None, "redis-server is not installed")
    assert binary is not None
    with tempfile.TemporaryDirectory(prefix="qbroker-redis-tls-") as tmp:
        ca, cert, key = make_certificates(Path(tmp))
        port = free_port()
        process = subprocess.Popen(
            [
                binary,
                "--port", "0",
                "--tls-port", str(port),
                "--bind", "127.0.0.1",
                "--tls-cert-file", str(cert),
                "--tls-key-file", str(key),
                "--tls-ca-cert-file", str(ca),
                "--tls-auth-clients", "no",
                "--requirepass", PASSWORD,
                "--save", "",
                "--appendonly", "no",
                "--dir", tmp,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_until(lambda: port_open(port), what="redis-server to listen on its TLS port")
            yield TlsRedis(port, ca)
        finally:
            process.terminate()
            process.wait(10)


async def test_a_questionnaire_goes_through_a_redis_over_tls_with_a_password(tls_redis: TlsRedis) -> None:
    with broker(tls_redis.url()) as process:
        sid = new_sid("tls")
        async with person(process.ws_url, sid) as p, Agent(process.url, sid) as agent:
            qid = str((await agent.start_pending(single()))["questionnaireId"])
            await p.answer(await p.wait_for("question"), ["staging"])
            outcome = await agent.get(qid, wait=10)
        assert outcome.status_code == 200 and outcome.json()["details"]["status"] == "completed"
        assert "tls-test-password" not in process.log()  # (the banner shows the URL redacted)


@pytest.mark.parametrize("wrong", ["no password", "another CA"])
def test_without_the_password_or_trusting_another_ca_the_broker_does_not_start(
    tls_redis: TlsRedis, tmp_path: Path, wrong: str
) -> None:
    url = tls_redis.url(password=None) if wrong == "no password" else tls_redis.url(ca=make_certificates(tmp_path)[0])
    result = subprocess.run(
        [sys.executable, "-m", "qbroker.cli", "serve", "--host", "127.0.0.1", "--port", str(free_port())],
        env=broker_env(str(tmp_path), url),
        cwd=str(REPO_ROOT),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 3, result.stderr
    assert "qbroker cannot start: redis store" in result.stderr
    assert PASSWORD not in result.stderr + result.stdout
