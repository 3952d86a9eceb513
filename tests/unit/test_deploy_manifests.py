"""The deployment files parse and agree with each other and with the broker.

docker-compose.yml, deploy/k8s/*.yaml, deploy/nginx.conf and deploy/Dockerfile are read as
text/YAML (no Docker, no cluster): ports, paths, names and timeouts must line up, and every
QBROKER_* setting they use must be one the broker reads.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from broker.server import refused_secret

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
PORT = 8700
LONG_POLL_MAX = 300  # docs/protocol.md: wait is 0-300 s


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def _k8s() -> dict[str, dict[str, Any]]:
    """Every manifest by kind (one object of each kind)."""
    by_kind: dict[str, dict[str, Any]] = {}
    for path in sorted(K8S.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            assert document["kind"] not in by_kind, f"two {document['kind']} objects"
            by_kind[document["kind"]] = document
    return by_kind


def _nginx() -> str:
    return (DEPLOY / "nginx.conf").read_text()


def _seconds(value: str) -> int:
    match = re.fullmatch(r"(\d+)(s|m)?", value)
    assert match, value
    return int(match.group(1)) * (60 if match.group(2) == "m" else 1)


def _settings_the_broker_reads() -> set[str]:
    return set(re.findall(r'"(QBROKER_[A-Z_]+)"', (ROOT / "broker" / "runtime" / "config.py").read_text()))


# --- docker-compose.yml ---------------------------------------------------------------


def test_compose_runs_redis_two_brokers_and_nginx() -> None:
    services = _compose()["services"]
    assert set(services) == {"redis", "broker", "nginx"}
    assert services["broker"]["deploy"]["replicas"] == 2


def _default_of(variable: str) -> str:
    """The default of a compose ``${NAME:-default}`` (the image names are variables)."""
    match = re.fullmatch(r"\$\{\w+:-([^}]+)\}", variable)
    assert match, variable
    return match.group(1)


def test_compose_brokers_share_the_secret_and_the_password_protected_redis() -> None:
    broker = _compose()["services"]["broker"]
    env = broker["environment"]
    assert env["QBROKER_SECRET"].startswith("${QBROKER_SECRET:?")  # required, never a default
    assert env["QBROKER_REDIS_URL"] == "redis://:${QBROKER_REDIS_PASSWORD}@redis:6379/0"
    assert broker["build"]["dockerfile"] == "deploy/Dockerfile"
    assert _default_of(broker["image"]) == "qbroker:0.1.0"
    assert broker["depends_on"]["redis"]["condition"] == "service_healthy"
    assert _seconds(broker["stop_grace_period"]) > float(env["QBROKER_SHUTDOWN_GRACE"])


def test_compose_brokers_are_read_only_with_their_data_dir_on_a_tmpfs() -> None:
    broker = _compose()["services"]["broker"]
    assert broker["read_only"] is True
    data_dir = broker["environment"]["QBROKER_DATA_DIR"]
    assert any(data_dir.startswith(mount.rstrip("/") + "/") for mount in broker["tmpfs"]), broker["tmpfs"]


def test_compose_redis_is_7_password_protected_with_aof_fsynced_every_second_and_no_eviction() -> None:
    redis = _compose()["services"]["redis"]
    assert re.match(r"redis:7", _default_of(redis["image"]))
    assert redis["environment"]["QBROKER_REDIS_PASSWORD"].startswith("${QBROKER_REDIS_PASSWORD:?")
    command = " ".join(redis["command"])
    assert '--requirepass "$$QBROKER_REDIS_PASSWORD"' in command
    assert "--appendonly yes" in command
    assert "--appendfsync everysec" in command
    assert "--maxmemory-policy noeviction" in command
    assert any(volume.endswith(":/data") for volume in redis["volumes"])


def test_compose_nginx_uses_deploy_nginx_conf_and_publishes_its_listen_port() -> None:
    nginx = _compose()["services"]["nginx"]
    assert "./deploy/nginx.conf:/etc/nginx/nginx.conf:ro" in nginx["volumes"]
    (published,) = nginx["ports"]
    published = re.sub(r"\$\{\w+:-(\d+)\}", r"\1", published)
    host, _host_port, container_port = published.split(":")  # (the host port is a variable)
    assert host == "127.0.0.1"
    assert re.search(rf"^\s*listen {container_port};", _nginx(), re.MULTILINE)
    assert set(nginx["depends_on"]) == {"broker"}


# --- deploy/nginx.conf ----------------------------------------------------------------


def test_nginx_balances_over_the_compose_brokers_name_on_the_broker_port() -> None:
    servers = re.findall(r"^\s*server ([\w.-]+):(\d+)\b", _nginx(), re.MULTILINE)
    assert servers == [("broker", str(PORT))]  # the name every replica of the service answers to


def test_nginx_needs_no_sticky_sessions_and_upgrades_websockets() -> None:
    conf = _nginx()
    assert not re.search(r"^\s*(ip_hash|hash|sticky|least_conn)\b", conf, re.MULTILINE)
    assert "proxy_set_header Upgrade $http_upgrade;" in conf
    assert "proxy_set_header Connection $connection_upgrade;" in conf
    assert "proxy_http_version 1.1;" in conf
    assert "proxy_set_header Host $http_host;" in conf  # the same-origin check needs the port


def test_nginx_outwaits_the_longest_long_poll() -> None:
    conf = _nginx()
    (read_timeout,) = re.findall(r"proxy_read_timeout (\w+);", conf)
    assert _seconds(read_timeout) > LONG_POLL_MAX
    assert "proxy_buffering off;" in conf


# --- deploy/Dockerfile ----------------------------------------------------------------


def test_dockerfile_takes_its_base_runs_non_root_health_checked_and_serves_on_all_interfaces() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE=python:3\.11-slim$", text, re.MULTILINE)
    assert re.findall(r"^FROM (\S+)", text, re.MULTILINE) == ["${BASE}", "${BASE}"]
    (user,) = re.findall(r"^USER (\S+)", text, re.MULTILINE)
    assert user.split(":")[0] not in ("root", "0")
    assert re.search(rf"^EXPOSE {PORT}$", text, re.MULTILINE)
    healthcheck = text[text.index("\nHEALTHCHECK ") :].split("\n\n")[0]
    assert "python" in healthcheck and "/readyz" in healthcheck and "curl" not in healthcheck
    assert 'ENTRYPOINT ["qbroker"]' in text
    assert 'CMD ["serve", "--host", "0.0.0.0"]' in text


# --- deploy/k8s -----------------------------------------------------------------------


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    # (secret.yaml only shows the Secret's shape: test_k8s_ships_no_usable_secret)
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml", "secret.yaml"}
    assert sorted(kustomization["resources"]) == sorted(files)


def test_k8s_has_every_object_the_deployment_needs() -> None:
    assert set(_k8s()) >= {
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "HorizontalPodAutoscaler",
        "Secret",
        "ConfigMap",
    }


def _container(objects: dict[str, dict[str, Any]]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = objects["Deployment"]["spec"]["template"]["spec"]["containers"]
    (container,) = containers
    return container


def test_k8s_probes_hit_readyz_and_healthz_on_the_named_broker_port() -> None:
    container = _container(_k8s())
    (port,) = container["ports"]
    assert port == {"name": "http", "containerPort": PORT, "protocol": "TCP"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert "--port" in container["args"] and str(PORT) in container["args"]


def test_k8s_grace_period_outlasts_the_prestop_drain_plus_the_shutdown_grace() -> None:
    objects = _k8s()
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    command = _container(objects)["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep"
    shutdown_grace = float(objects["ConfigMap"]["data"]["QBROKER_SHUTDOWN_GRACE"])
    assert pod["terminationGracePeriodSeconds"] > float(command[1]) + shutdown_grace


def test_k8s_pods_read_the_configmap_and_the_secret_and_run_as_non_root() -> None:
    objects = _k8s()
    sources = _container(objects)["envFrom"]
    assert {"configMapRef": {"name": objects["ConfigMap"]["metadata"]["name"]}} in sources
    assert {"secretRef": {"name": objects["Secret"]["metadata"]["name"]}} in sources
    assert set(objects["Secret"]["stringData"]) == {"QBROKER_SECRET", "QBROKER_REDIS_URL"}
    assert objects["Deployment"]["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


def test_k8s_keeps_the_redis_password_in_the_secret_and_speaks_tls() -> None:
    objects = _k8s()
    assert "QBROKER_REDIS_URL" not in objects["ConfigMap"]["data"]  # (a ConfigMap is no place for it)
    url = urlsplit(objects["Secret"]["stringData"]["QBROKER_REDIS_URL"])
    assert url.scheme == "rediss" and url.password


def test_k8s_ships_no_usable_secret() -> None:
    """secret.yaml only shows the Secret's shape, with a placeholder ``serve`` refuses, and
    kustomization.yaml does not apply it (it would overwrite the one created out of band)."""
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert "secret.yaml" not in kustomization["resources"]
    assert refused_secret(_k8s()["Secret"]["stringData"]["QBROKER_SECRET"]) is not None


def test_k8s_service_pdb_and_hpa_select_the_deployment_pods() -> None:
    objects = _k8s()
    deployment = objects["Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = objects["Service"]["spec"]
    assert service["selector"].items() <= labels.items()
    assert "sessionAffinity" not in service
    assert [p["targetPort"] for p in service["ports"]] == ["http"]
    assert objects["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    hpa = objects["HorizontalPodAutoscaler"]["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "qbroker"}
    assert deployment["metadata"]["name"] == "qbroker"
    assert hpa["minReplicas"] <= deployment["spec"]["replicas"] <= hpa["maxReplicas"]
    assert _container(objects)["resources"]["requests"]["cpu"]  # the HPA's utilization needs it


@pytest.mark.parametrize("where", ["compose", "k8s"])
def test_every_qbroker_setting_used_is_one_the_broker_reads(where: str) -> None:
    if where == "compose":
        names = set(_compose()["services"]["broker"]["environment"])
    else:
        objects = _k8s()
        names = set(objects["ConfigMap"]["data"]) | set(objects["Secret"]["stringData"])
        names |= {e["name"] for e in _container(objects).get("env", [])}
    assert names <= _settings_the_broker_reads(), names - _settings_the_broker_reads()
