"""Every shipped container's full argv, resolved as Docker and Kubernetes would, runs here.

There is no container engine on this machine, so the argv is resolved from the real files:
the Dockerfile's ENTRYPOINT/CMD, then compose's ``entrypoint``/``command`` or Kubernetes'
``command``/``args`` over them, with compose's ``${VAR:-default}`` interpolation. The leading
``convmon`` is then this environment's ``convmon`` executable. A worker argv must start for real
against the embedded broker and consume an event; a retrainer argv must run a real round on a temp
label store and model registry; every other argv must parse completely (all its options accepted
and converted) and answer ``--help``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
import yaml

from monitor.cli import app as cli_app
from monitor.contracts.settings import REPO_ROOT, Settings
from monitor.runtime.broker import free_port, stop_process
from monitor.runtime.produce import produce_events
from monitor.runtime.scrape import scrape, total, wait_for_metrics
from tests.support.workers import wait_until

CONVMON = Path(sys.executable).with_name("convmon")
K8S_DIR = REPO_ROOT / "deploy" / "k8s"


def dockerfile_exec(instruction: str) -> list[str] | None:
    """The last ENTRYPOINT or CMD of the Dockerfile, exec (JSON) form or shell form."""
    found: list[str] | None = None
    text = (REPO_ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    for line in text.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word.upper() == instruction:
            rest = rest.strip()
            found = json.loads(rest) if rest.startswith("[") else ["/bin/sh", "-c", rest]
    return found


def interpolate(value: str) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``$$``, from this process's environment."""

    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(3)
        return os.environ.get(name) or (default if default is not None else "")

    return re.sub(r"\$\{(\w+)(:-([^}]*))?\}", sub, value).replace("$$", "$")


@dataclass(frozen=True)
class Service:
    source: str  # "compose:worker-1", "k8s:worker.yaml/Deployment/convmon-worker"
    argv: list[str]
    env: dict[str, str]  # the literal CONVMON_* values the container gets (compose environment, ConfigMap)


def as_list(value: str | list[str]) -> list[str]:
    return value.split() if isinstance(value, str) else [str(v) for v in value]


def compose_services() -> list[Service]:
    compose = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    out = []
    for name, spec in compose["services"].items():
        if "build" not in spec:  # third-party images (Kafka, Prometheus, ...)
            continue
        entrypoint, cmd = dockerfile_exec("ENTRYPOINT") or [], dockerfile_exec("CMD") or []
        if "entrypoint" in spec:  # overrides ENTRYPOINT and drops the image's CMD
            entrypoint, cmd = as_list(spec["entrypoint"]), []
        if "command" in spec:
            cmd = as_list(spec["command"])
        env = {k: interpolate(str(v)) for k, v in (spec.get("environment") or {}).items()}
        out.append(Service(f"compose:{name}", [interpolate(a) for a in entrypoint + cmd], env))
    return out


def k8s_services() -> list[Service]:
    docs = [d for path in sorted(K8S_DIR.glob("*.yaml")) for d in yaml.safe_load_all(path.read_text()) if d]
    config_maps = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    out = []
    for doc in docs:
        pod = {"Deployment": lambda d: d["spec"]["template"],
               "StatefulSet": lambda d: d["spec"]["template"],
               "CronJob": lambda d: d["spec"]["jobTemplate"]["spec"]["template"]}.get(doc["kind"])
        if pod is None:
            continue
        for container in pod(doc)["spec"]["containers"]:
            if not container["image"].startswith("convmon:"):
                continue
            entrypoint, cmd = dockerfile_exec("ENTRYPOINT") or [], dockerfile_exec("CMD") or []
            if "command" in container:  # replaces ENTRYPOINT, and the image's CMD unless args are given
                entrypoint, cmd = container["command"], []
            if "args" in container:
                cmd = container["args"]
            env: dict[str, str] = {}
            for source in container.get("envFrom", []):
                env.update(config_maps[source["configMapRef"]["name"]])
            env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
            name = f"k8s:{doc['kind']}/{doc['metadata']['name']}"
            out.append(Service(name, [str(a) for a in entrypoint + cmd], env))
    return out


SERVICES = compose_services() + k8s_services()
WORKERS = [s for s in SERVICES if s.argv[1:2] == ["worker"]]
RETRAINERS = [s for s in SERVICES if s.argv[1:2] == ["retrain"]]
OTHERS = [s for s in SERVICES if s.argv[1:2] not in (["worker"], ["retrain"])]


def test_every_convmon_container_is_found_and_uses_the_entrypoint_convention() -> None:
    names = {s.source for s in SERVICES}
    assert {"compose:worker-1", "compose:worker-2", "compose:simulator", "compose:retrainer"} <= names
    assert {"k8s:Deployment/convmon-worker", "k8s:CronJob/convmon-distill"} <= names
    # exactly one retrainer per deployment: compose's service, the CronJob in k8s (workers never retrain)
    assert [s.source for s in RETRAINERS if s.source.startswith("compose:")] == ["compose:retrainer"]
    assert [s.source for s in RETRAINERS if s.source.startswith("k8s:")] == ["k8s:CronJob/convmon-distill"]
    for service in SERVICES:
        assert service.argv[0] == "convmon", f"{service.source}: runs {service.argv[0]!r}, not convmon"
        assert service.argv[1:2] != ["convmon"], f"{service.source}: argv {service.argv} repeats convmon"


def parse_fully(args: list[str]) -> list[str]:
    """Parse ``args`` through every command level as click would run them; returns the command path."""
    command = typer.main.get_command(cli_app)
    path = ["convmon"]
    while True:
        ctx = command.make_context(path[-1], list(args), resilient_parsing=False)
        if not isinstance(command, typer.core.TyperGroup):
            return path
        protected = ctx._protected_args if hasattr(ctx, "_protected_args") else ctx.protected_args  # click < 8.2
        rest = [*protected, *ctx.args]
        name, sub, args = command.resolve_command(ctx, rest)
        assert sub is not None and name is not None
        command = sub
        path.append(name)


def test_a_broken_argv_does_not_parse() -> None:
    """The parse check can fail: the old doubled form and an unknown option are rejected."""
    with pytest.raises(Exception, match="No such command 'convmon'"):
        parse_fully(["convmon", "worker"])
    with pytest.raises(Exception, match="No such option"):
        parse_fully(["simulate", "--no-such-option", "1"])
    with pytest.raises(typer.BadParameter):
        parse_fully(["simulate", "--rate", "fast"])


def run_env(overrides: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.update(overrides)
    return env


@pytest.mark.parametrize("service", OTHERS, ids=lambda s: s.source)
def test_non_worker_argv_parses_and_runs_help(service: Service) -> None:
    command = parse_fully(service.argv[1:])
    assert len(command) >= 2, f"{service.source}: {service.argv} names no command"
    argv = [str(CONVMON), *service.argv[1:], "--help"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=run_env({}))
    assert result.returncode == 0, f"{service.source}: {argv} -> {result.stdout}{result.stderr}"
    assert "Usage: convmon " + " ".join(command[1:]) in result.stdout


@pytest.mark.integration
@pytest.mark.parametrize("service", WORKERS, ids=lambda s: s.source)
def test_worker_argv_starts_against_the_broker(service: Service, broker: str, tmp_path: Path) -> None:
    """The container's own argv and CONVMON_* values, pointed at the test broker, consume an event."""
    port = free_port()
    unique = uuid.uuid4().hex[:8]
    test_env = {
        "CONVMON_BROKER_URL": f"kafka://{broker}",
        "CONVMON_KAFKA_SECURITY_PROTOCOL": "PLAINTEXT",  # the embedded broker has no SASL/TLS listener
        "CONVMON_APP_ID": f"argv-{unique}",
        "CONVMON_TOPIC_PREFIX": f"argv{unique}.",
        "CONVMON_METRICS_HOST": "127.0.0.1",
        "CONVMON_METRICS_PORT": str(port),
        "CONVMON_DATA_DIR": str(tmp_path / "state"),
        "CONVMON_MODEL_REGISTRY": str(tmp_path / "models"),
        "CONVMON_LABEL_STORE_URL": f"sqlite:///{tmp_path / 'labels.db'}",
        "CONVMON_DISTILL_REPORT_DIR": str(tmp_path / "reports"),
    }
    env = {k: v for k, v in service.env.items() if k.startswith("CONVMON_") and not k.startswith("CONVMON_KAFKA_")}
    env.update(test_env)
    settings = Settings(broker_url=test_env["CONVMON_BROKER_URL"], topic_prefix=test_env["CONVMON_TOPIC_PREFIX"])
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([str(CONVMON), *service.argv[1:]], env=run_env(env), stdout=log,
                                stderr=subprocess.STDOUT, cwd=tmp_path)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        wait_for_metrics(url, proc, log_path=log_path, timeout=90)
        event = {"conversation_id": f"c-{unique}", "turn_index": 0, "role": "user", "text": "hello",
                 "timestamp": 1_700_000_000.0}
        asyncio.run(produce_events(settings, [event]))
        wait_until(lambda: total(scrape(url), "convmon_events_total") >= 1, timeout=90,
                   message=f"{service.source} to consume an event from {settings.topic('events')}")
        assert proc.poll() is None
    finally:
        stop_process(proc)
    assert proc.returncode in (0, -15), log_path.read_text(errors="replace")[-3000:]


def retrainer_env(service: Service, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The container's CONVMON_* values with a temp label store (seeded with judged, rated labels) and registry."""
    from distill.store import LabelStore
    from monitor.contracts.rubric_set import load_rubric_set
    from tests.support.model_fixtures import feedback_label_records

    db = f"sqlite:///{tmp_path / 'labels.db'}"
    store = LabelStore(db)
    store.upsert(feedback_label_records(load_rubric_set("spur-copilot", REPO_ROOT / "prompts"), 250, seed=3))
    store.close()
    env = {k: v for k, v in service.env.items() if k.startswith("CONVMON_") and not k.startswith("CONVMON_KAFKA_")}
    env.update({"CONVMON_LABEL_STORE_URL": db, "CONVMON_MODEL_REGISTRY": str(tmp_path / "models"),
                "CONVMON_DISTILL_REPORT_DIR": str(tmp_path / "reports"), "CONVMON_METRICS_HOST": "127.0.0.1",
                "CONVMON_KAFKA_SECURITY_PROTOCOL": "PLAINTEXT", **extra})
    return env


@pytest.mark.parametrize("service", RETRAINERS, ids=lambda s: s.source)
def test_retrainer_argv_runs_a_round(service: Service, tmp_path: Path) -> None:
    """`retrain --once` runs one round and exits 0; the long-running form runs rounds on its schedule
    (a seconds cron here instead of every 15 minutes) and serves them on its /metrics."""
    from distill.registry import ModelRegistry

    port = free_port()
    env = retrainer_env(service, tmp_path, CONVMON_RETRAIN_METRICS_PORT=str(port))
    argv = [str(CONVMON), *service.argv[1:]]
    if "--once" in argv:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=run_env(env), cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "retrain distilled spur-copilot" in result.stderr and "retrain calibration" in result.stderr
    else:
        env["CONVMON_RETRAIN_CRON"] = "* * * * * */2"
        env["CONVMON_CALIBRATION_MIN_LABELS"] = "0"  # distilled only: a calibration round takes minutes here
        log_path = tmp_path / "retrain.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(argv, env=run_env(env), stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
        url = f"http://127.0.0.1:{port}/metrics"
        try:
            wait_for_metrics(url, proc, log_path=log_path, timeout=60)
            wait_until(lambda: total(scrape(url), "convmon_retrain_rounds_total") >= 2, timeout=240,
                       message=f"two rounds of {service.source}: {log_path.read_text(errors='replace')[-2000:]}")
            failed = [v for name, labels, v in scrape(url)
                      if name == "convmon_retrain_rounds_total" and labels["outcome"] == "failed"]
            assert sum(failed) == 0, log_path.read_text(errors="replace")[-3000:]
        finally:
            stop_process(proc)
        assert proc.returncode in (0, -15), log_path.read_text(errors="replace")[-3000:]
    kinds = ["distilled"] + (["calibration"] if "--once" in argv else [])
    assert all(ModelRegistry(tmp_path / "models").live_version(kind) for kind in kinds)  # rounds that published
