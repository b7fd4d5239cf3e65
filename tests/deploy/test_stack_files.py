"""docker-compose.yml and deploy/k8s/worker.yaml agree with Settings, Prometheus and Grafana files.

There is no Docker engine or cluster in CI, so this checks what can go wrong silently: a
CONVMON_* variable that is not a setting (ignored), a value Settings rejects, a scrape target
that is not a worker, a mounted file that does not exist.
"""

from __future__ import annotations

import pytest
import yaml

from monitor.settings import REPO_ROOT, Settings

COMPOSE = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
K8S = list(yaml.safe_load_all((REPO_ROOT / "deploy" / "k8s" / "worker.yaml").read_text()))
PROMETHEUS = yaml.safe_load((REPO_ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
WORKERS = ["worker-1", "worker-2"]


def settings_from(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    unknown = sorted(k for k in env if k.startswith("CONVMON_") and k[8:].lower() not in Settings.model_fields)
    assert unknown == [], f"not settings fields: {unknown}"
    for key, value in env.items():
        monkeypatch.setenv(key, str(value))
    return Settings()


@pytest.mark.parametrize("service", [*WORKERS, "simulator"])
def test_compose_worker_environment_is_valid_settings(service: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = COMPOSE["services"][service]
    settings = settings_from(spec["environment"], monkeypatch)
    assert settings.broker_url == "kafka://kafka:9092"
    assert settings.metrics_host == "0.0.0.0" and settings.metrics_port == 9100
    assert spec["command"][0] in {"worker", "simulate"}  # the image's ENTRYPOINT is `convmon`


def test_compose_workers_have_their_own_state_and_share_models() -> None:
    dirs = {COMPOSE["services"][w]["environment"]["CONVMON_DATA_DIR"] for w in WORKERS}
    assert len(dirs) == 2
    assert len({COMPOSE["services"][w]["environment"]["CONVMON_MODEL_REGISTRY"] for w in WORKERS}) == 1


def test_compose_runs_kafka_in_kraft_mode_with_the_official_image() -> None:
    kafka = COMPOSE["services"]["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    assert "controller" in kafka["environment"]["KAFKA_PROCESS_ROLES"]
    assert not any("zookeeper" in name for name in COMPOSE["services"])


def test_prometheus_scrapes_exactly_the_compose_workers() -> None:
    job = next(j for j in PROMETHEUS["scrape_configs"] if j["job_name"] == "convmon")
    targets = {t for sc in job["static_configs"] for t in sc["targets"]}
    port = COMPOSE["services"]["worker-1"]["environment"]["CONVMON_METRICS_PORT"]
    assert targets == {f"{w}:{port}" for w in WORKERS}
    for w in WORKERS:
        assert COMPOSE["services"][w]["hostname"] == w
    am = PROMETHEUS["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert am == ["alertmanager:9093"] and "alertmanager" in COMPOSE["services"]


def test_compose_bind_mounts_exist() -> None:
    for name, service in COMPOSE["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (REPO_ROOT / source).exists(), f"{name} mounts missing {source}"
    prom_mounts = COMPOSE["services"]["prometheus"]["volumes"]
    assert "./deploy/prometheus/rules:/etc/prometheus/rules:ro" in prom_mounts
    assert PROMETHEUS["rule_files"] == ["rules/*.yml"]


def test_k8s_worker_config_is_valid_settings_and_ports_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    kinds = {doc["kind"]: doc for doc in K8S}
    assert set(kinds) == {"ConfigMap", "Deployment", "Service"}
    config = kinds["ConfigMap"]["data"]
    settings = settings_from(config, monkeypatch)
    pod = kinds["Deployment"]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert {e["name"] for e in container["env"]} <= {f"CONVMON_{f.upper()}" for f in Settings.model_fields}
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == settings.metrics_port == container["ports"][0]["containerPort"]
    assert settings.metric_dimensions == ["app", "locale", "model_version"]
    selector = kinds["Service"]["spec"]["selector"]
    assert selector.items() <= pod["metadata"]["labels"].items()
