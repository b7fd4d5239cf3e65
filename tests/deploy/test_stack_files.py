"""docker-compose.yml and deploy/k8s/worker.yaml agree with Settings, Prometheus and Grafana files.

There is no Docker engine or cluster in CI, so this checks what can go wrong silently: a
CONVMON_* variable that is not a setting (ignored), a value Settings rejects, a scrape target
that is not a worker, a mounted file that does not exist.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from monitor.contracts.settings import REPO_ROOT, Settings
from monitor.runtime.allocator import MALLOC_CONF

COMPOSE = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
K8S = list(yaml.safe_load_all((REPO_ROOT / "deploy" / "k8s" / "worker.yaml").read_text()))
K8S_ALL = [d for p in sorted((REPO_ROOT / "deploy" / "k8s").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text())]
PROMETHEUS = yaml.safe_load((REPO_ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
WORKERS = ["worker-1", "worker-2"]


def settings_from(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    unknown = sorted(k for k in env if k.startswith("CONVMON_") and k[8:].lower() not in Settings.model_fields)
    assert unknown == [], f"not settings fields: {unknown}"
    for key, value in env.items():
        monkeypatch.setenv(key, str(value))
    return Settings()


@pytest.mark.parametrize("service", [*WORKERS, "simulator", "retrainer"])
def test_compose_worker_environment_is_valid_settings(service: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = COMPOSE["services"][service]
    settings = settings_from(spec["environment"], monkeypatch)
    assert settings.broker_url == "kafka://kafka:9092"
    assert settings.metrics_host == "0.0.0.0" and settings.metrics_port == 9100
    assert spec["command"][0] in {"worker", "simulate", "retrain"}  # the image's ENTRYPOINT is `convmon`


def test_compose_workers_have_their_own_state_and_share_models() -> None:
    dirs = {COMPOSE["services"][w]["environment"]["CONVMON_DATA_DIR"] for w in WORKERS}
    assert len(dirs) == 2
    assert len({COMPOSE["services"][w]["environment"]["CONVMON_MODEL_REGISTRY"] for w in WORKERS}) == 1


def test_one_retrainer_per_deployment_and_probes_on_the_worker_endpoints() -> None:
    """compose: the `retrainer` service, scraped by Prometheus; k8s: the CronJob, one round at a time."""
    retrainers = [n for n, s in COMPOSE["services"].items() if s.get("command", [None])[0] == "retrain"]
    assert retrainers == ["retrainer"] and COMPOSE["services"]["retrainer"]["command"] == ["retrain"]
    port = COMPOSE["services"]["retrainer"]["environment"]["CONVMON_RETRAIN_METRICS_PORT"]
    job = next(j for j in PROMETHEUS["scrape_configs"] if j["job_name"] == "convmon-retrain")
    assert job["static_configs"][0]["targets"] == [f"retrainer:{port}"]
    cron = k8s("CronJob")
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert pod_spec(cron)["containers"][0]["args"] == ["retrain", "--once"]
    container = pod_spec(k8s("Deployment", "convmon-worker"))["containers"][0]
    assert container["args"] == ["worker"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == container["startupProbe"]["httpGet"]["path"] == "/healthz"
    for worker in WORKERS:
        assert "/readyz" in " ".join(COMPOSE["services"][worker]["healthcheck"]["test"])


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


def test_k8s_prometheus_finds_every_worker_through_the_headless_service() -> None:
    config = yaml.safe_load((REPO_ROOT / "deploy" / "prometheus" / "prometheus-k8s.yml").read_text())
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "convmon")  # the rules' job="convmon"
    service = k8s("Service", "convmon-worker")
    name = f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc.cluster.local"
    assert job["dns_sd_configs"][0]["names"] == [name]
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert job["dns_sd_configs"][0]["port"] == service["spec"]["ports"][0]["port"]
    assert config["rule_files"] == PROMETHEUS["rule_files"]


def test_compose_bind_mounts_exist() -> None:
    for name, service in COMPOSE["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (REPO_ROOT / source).exists(), f"{name} mounts missing {source}"
    prom_mounts = COMPOSE["services"]["prometheus"]["volumes"]
    assert "./deploy/prometheus/rules:/etc/prometheus/rules:ro" in prom_mounts
    assert PROMETHEUS["rule_files"] == ["rules/*.yml"]


def k8s(kind: str, name: str | None = None) -> dict:
    return next(d for d in K8S_ALL if d and d["kind"] == kind and (name is None or d["metadata"]["name"] == name))


def pod_spec(doc: dict) -> dict:
    spec = doc["spec"]["jobTemplate"]["spec"] if doc["kind"] == "CronJob" else doc["spec"]
    return spec["template"]["spec"]


def container_settings(doc: dict, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The Settings a container gets: its ConfigMap, literal env, and a placeholder for each Secret key."""
    container = pod_spec(doc)["containers"][0]
    env = dict(k8s("ConfigMap", container["envFrom"][0]["configMapRef"]["name"])["data"])
    for var in container["env"]:
        ref = var.get("valueFrom", {}).get("secretKeyRef")
        assert ref is None or ref["key"] in k8s("Secret", ref["name"])["stringData"], f"{var} not in secret.yaml"
        env[var["name"]] = var.get("value", "placeholder")
    return settings_from(env, monkeypatch)


def test_k8s_worker_config_is_valid_settings_and_ports_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    kinds = {doc["kind"]: doc for doc in K8S}
    assert set(kinds) == {"ConfigMap", "PersistentVolumeClaim", "Deployment", "Service", "PodDisruptionBudget"}
    settings = container_settings(kinds["Deployment"], monkeypatch)
    pod = kinds["Deployment"]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert {e["name"] for e in container["env"]} <= {f"CONVMON_{f.upper()}" for f in Settings.model_fields}
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == settings.metrics_port == container["ports"][0]["containerPort"]
    assert settings.metric_dimensions == ["app", "locale", "model_version"]
    for selector in (kinds["Service"]["spec"]["selector"],
                     kinds["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"]):
        assert selector.items() <= pod["metadata"]["labels"].items()


def test_k8s_sasl_tls_example_is_complete(monkeypatch: pytest.MonkeyPatch) -> None:
    deployment = k8s("Deployment", "convmon-worker")
    settings = container_settings(deployment, monkeypatch)
    assert settings.kafka_security_protocol == "SASL_SSL" and settings.kafka_sasl_password is not None
    mounts = {m["mountPath"]: m["name"] for m in pod_spec(deployment)["containers"][0]["volumeMounts"]}
    assert settings.kafka_ssl_cafile is not None
    ca_mount = mounts[str(settings.kafka_ssl_cafile.parent)]
    ca_volume = next(v for v in pod_spec(deployment)["volumes"] if v["name"] == ca_mount)
    assert ca_volume["secret"]["items"] == [{"key": "kafka-ca.crt", "path": settings.kafka_ssl_cafile.name}]
    # the retraining job validates the same ConfigMap, so it needs the SASL credentials too
    assert container_settings(k8s("CronJob"), monkeypatch).kafka_sasl_username is not None


def test_k8s_pods_run_as_the_image_user_with_a_read_only_root(monkeypatch: pytest.MonkeyPatch) -> None:
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    uid = int(re.search(r"useradd [^\n]*--uid (\d+)", dockerfile).group(1))
    assert re.search(rf"^USER {uid}\b", dockerfile, re.M)
    workdir = Path(re.findall(r"^WORKDIR (\S+)", dockerfile, re.M)[-1])  # where relative settings resolve
    for doc in (k8s("Deployment", "convmon-worker"), k8s("CronJob"), k8s("Deployment", "convmon-anchors")):
        spec = pod_spec(doc)
        assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] == uid
        container = spec["containers"][0]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
        assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        writable = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"] if not m.get("readOnly")}
        assert "emptyDir" in writable["/tmp"]
        settings = container_settings(doc, monkeypatch)
        paths = [settings.model_registry, settings.data_dir, settings.distill_report_dir]
        for path in (workdir / p for p in paths):  # every directory convmon writes is on a mounted volume
            assert any(path.is_relative_to(mount) for mount in writable if mount != "/tmp"), path


def test_k8s_state_is_ephemeral_and_the_registry_shared() -> None:
    volumes = {v["name"]: v for v in pod_spec(k8s("Deployment", "convmon-worker"))["volumes"]}
    claim = k8s("PersistentVolumeClaim", volumes["models"]["persistentVolumeClaim"]["claimName"])
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # scaled workers on several nodes share it
    assert "emptyDir" in volumes["home"]  # faust tables are rebuilt from their changelogs
    cron_volumes = {v["name"]: v for v in pod_spec(k8s("CronJob"))["volumes"]}
    assert cron_volumes["models"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]


def test_keda_scales_on_the_workers_group_and_stops_at_the_partition_count(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = container_settings(k8s("Deployment", "convmon-worker"), monkeypatch)
    scaled = k8s("ScaledObject")
    assert scaled["spec"]["scaleTargetRef"]["name"] == k8s("Deployment", "convmon-worker")["metadata"]["name"]
    worker = k8s("Deployment", "convmon-worker")
    assert "replicas" not in worker["spec"]  # KEDA owns the count; an applied value would fight it
    assert 1 <= scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"] == settings.topic_partitions
    trigger = scaled["spec"]["triggers"][0]
    meta = trigger["metadata"]
    assert trigger["type"] == "kafka" and meta["allowIdleConsumers"] == "false"
    assert meta["bootstrapServers"] == settings.broker_url.split("://", 1)[1]
    assert meta["consumerGroup"] == f"{settings.app_id}-writer" and meta["topic"] == settings.topic("events")
    assert meta["sasl"] == settings.kafka_sasl_mechanism.lower().replace("-", "_").replace("_sha_", "_sha")
    assert meta["tls"] == ("enable" if settings.kafka_security_protocol.endswith("SSL") else "disable")
    auth = k8s("TriggerAuthentication", trigger["authenticationRef"]["name"])
    secret = k8s("Secret")["stringData"]
    assert {ref["parameter"] for ref in auth["spec"]["secretTargetRef"]} == {"username", "password", "ca"}
    assert all(ref["key"] in secret for ref in auth["spec"]["secretTargetRef"])
    behavior = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] >= 600  # rebalance + table recovery per step


def test_the_image_preloads_the_jemalloc_it_installs_and_compose_and_k8s_keep_it() -> None:
    """The soak measures workers on jemalloc (monitor/runtime/allocator.py): the image must run them on it too."""
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    assert re.search(r"apt-get install [^\n]*\blibjemalloc2\b", dockerfile)
    link = re.search(r"ln -s .+ (\S+libjemalloc\.so\.2)$", dockerfile, re.M).group(1)
    assert re.search(rf"^ENV LD_PRELOAD={re.escape(link)} MALLOC_CONF={re.escape(MALLOC_CONF)}$", dockerfile, re.M)
    assert link == "/usr/local/lib/libjemalloc.so.2"  # the first place find_jemalloc looks
    for env in [s.get("environment", {}) for s in COMPOSE["services"].values()] + [
            {e["name"]: e for e in c.get("env", [])} for d in K8S_ALL if d.get("kind") in ("Deployment", "CronJob")
            for c in pod_spec(d)["containers"]]:
        assert "LD_PRELOAD" not in env and "MALLOC_CONF" not in env


def test_one_anchors_owner_scraped_in_compose_and_k8s() -> None:
    """`convmon anchors run`: one compose service and one Recreate Deployment, each scraped on its metrics port."""
    owners = [n for n, s in COMPOSE["services"].items() if s.get("command", [None])[:2] == ["anchors", "run"]]
    assert owners == ["anchors"]
    port = COMPOSE["services"]["anchors"]["environment"]["CONVMON_ANCHORS_METRICS_PORT"]
    job = next(j for j in PROMETHEUS["scrape_configs"] if j["job_name"] == "convmon-anchors")
    assert job["static_configs"][0]["targets"] == [f"anchors:{port}"]
    deployment = k8s("Deployment", "convmon-anchors")
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    assert pod_spec(deployment)["containers"][0]["args"] == ["anchors", "run"]
