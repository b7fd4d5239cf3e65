"""Security properties: Kafka SASL/TLS wiring, secrets never leaving the process, PII kept out of
logs and judge prompts, model artifacts that cannot execute code, /metrics bound where configured."""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from distill.featurizers.spec import featurizer_from_config
from distill.model import RubricModel
from distill.registry import ModelRegistry
from monitor.contracts.errors import ConfigError, JudgeError, ModelError
from monitor.contracts.events import Conversation
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import Settings
from monitor.runtime.broker import free_port
from monitor.runtime.clients import aiokafka_kwargs, ssl_context
from monitor.runtime.deadletter import DeadLetters
from monitor.runtime.produce import produce_events
from monitor.tools.openai_server import OpenAIServer
from monitor.tools.simulator.generate import ConversationGenerator
from tests.support.judge_wiring import judge_from
from tests.support.workers import settings_env, wait_until

FAKE_KEY = "sk-convmon-LEAKCHECK-7f3a9c21e8"
FAKE_SASL = "sasl-LEAKCHECK-pw-4d2b"


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A throwaway self-signed certificate and key (it is also its own CA)."""
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=convmon-test", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


# --- Kafka security settings ---------------------------------------------------------------------

def test_plaintext_has_no_credentials() -> None:
    s = Settings()
    assert ssl_context(s) is None
    assert aiokafka_kwargs(s) == {"security_protocol": "PLAINTEXT"}


def test_ssl_builds_a_verifying_context_with_client_certificate(tls_files: tuple[Path, Path]) -> None:
    cert, key = tls_files
    s = Settings(kafka_security_protocol="SSL", kafka_ssl_cafile=cert, kafka_ssl_certfile=cert, kafka_ssl_keyfile=key)
    context = ssl_context(s)
    assert context is not None and context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert any("convmon-test" in str(c.get("subject")) for c in context.get_ca_certs())
    kwargs = aiokafka_kwargs(s)
    assert kwargs["security_protocol"] == "SSL" and isinstance(kwargs["ssl_context"], ssl.SSLContext)
    assert kwargs["ssl_context"].get_ca_certs() == context.get_ca_certs()
    assert "sasl_plain_password" not in kwargs


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_plaintext_passes_mechanism_and_credentials(mechanism: str) -> None:
    s = Settings(kafka_security_protocol="SASL_PLAINTEXT", kafka_sasl_mechanism=mechanism,
                 kafka_sasl_username="convmon", kafka_sasl_password=FAKE_SASL)
    assert ssl_context(s) is None
    assert aiokafka_kwargs(s) == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
                                  "sasl_plain_username": "convmon", "sasl_plain_password": FAKE_SASL}


def test_sasl_ssl_adds_a_tls_context(tls_files: tuple[Path, Path]) -> None:
    cert, _ = tls_files
    s = Settings(kafka_security_protocol="SASL_SSL", kafka_sasl_mechanism="SCRAM-SHA-512", kafka_sasl_username="u",
                 kafka_sasl_password=FAKE_SASL, kafka_ssl_cafile=cert)
    kwargs = aiokafka_kwargs(s)
    assert kwargs["security_protocol"] == "SASL_SSL" and kwargs["sasl_mechanism"] == "SCRAM-SHA-512"
    assert isinstance(kwargs["ssl_context"], ssl.SSLContext)
    assert kwargs["ssl_context"].verify_mode == ssl.CERT_REQUIRED


def test_sasl_without_a_password_is_refused_with_a_fix() -> None:
    with pytest.raises(ValueError, match="kafka_sasl_mechanism, kafka_sasl_username and kafka_sasl_password"):
        Settings(kafka_security_protocol="SASL_SSL", kafka_sasl_mechanism="PLAIN", kafka_sasl_username="u")


def test_secrets_are_masked_in_settings_repr_and_dumps() -> None:
    s = Settings(openai_api_key=FAKE_KEY, kafka_security_protocol="SASL_PLAINTEXT", kafka_sasl_mechanism="PLAIN",
                 kafka_sasl_username="u", kafka_sasl_password=FAKE_SASL)
    for text in (repr(s), str(s), s.model_dump_json(), str(s.model_dump())):
        assert FAKE_KEY not in text and FAKE_SASL not in text


# --- secrets and PII in the judge path ----------------------------------------------------------

PII_TEXT = "I'm bob.smith@example.org, card 4111 1111 1111 1111, call +1 (415) 555-0100 from 10.1.2.3"


def test_the_judge_never_sends_pii_and_never_logs_the_key(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    """Through a real HTTP server: redacted prompts out; failing calls (500 then 401) log no key."""
    rubric = load_rubric_set("spur-copilot", Settings().prompts_dir)
    conversation = Conversation(conversation_id="pii", turns=[
        {"index": 0, "role": "user", "text": PII_TEXT}, {"index": 1, "role": "assistant", "text": "Noted."}])
    with OpenAIServer() as server:
        s = Settings(openai_base_url=server.url, openai_api_key=FAKE_KEY, judge_max_retries=1,
                     judge_backoff_base_s=0.0, judge_backoff_max_s=0.0,
                     label_store_url=f"sqlite:///{tmp_path / 'labels.db'}")
        server.script("good", "500", "401")

        async def run() -> None:
            judge = judge_from(s, rubric, Metrics(CollectorRegistry()))
            try:
                await judge.score(conversation)
                with pytest.raises(JudgeError) as info:
                    await judge.score(conversation)
                assert info.value.reason == "judge_auth" and FAKE_KEY not in str(info.value)
            finally:
                await judge.aclose()

        with caplog.at_level(logging.DEBUG):
            asyncio.run(run())
        bodies = repr(server.requests)
    assert len(server.requests) == 3
    for pii in ("bob.smith@example.org", "4111 1111 1111 1111", "555-0100", "10.1.2.3"):
        assert pii not in bodies
    assert "[EMAIL]" in bodies and "[CARD]" in bodies and "[PHONE]" in bodies and "[IP]" in bodies
    assert FAKE_KEY not in caplog.text


def test_dead_letter_details_with_user_text_stay_out_of_info_logs(caplog: pytest.LogCaptureFixture) -> None:
    sent: list[dict[str, object]] = []

    class Topic:
        async def send(self, **kwargs: object) -> None:
            sent.append(kwargs)

    metrics = Metrics(CollectorRegistry())
    dlq = DeadLetters(Topic(), metrics)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO):
        asyncio.run(dlq.send(b"raw", b"k", reason="invalid_schema", detail=f"field 'text': {PII_TEXT}", stage="x"))
    assert "bob.smith" not in caplog.text and "invalid_schema" in caplog.text
    assert sent[0]["value"] == b"raw"  # nothing to redact: the bytes are kept on the topic, not logged
    assert metrics.registry.get_sample_value("convmon_dead_letters_total", {"reason": "invalid_schema"}) == 1
    # PII in the record or the detail is redacted on the topic unless dead_letter_raw allows raw bytes
    raw = PII_TEXT.encode()
    asyncio.run(dlq.send(raw, b"k", reason="invalid_schema", detail=f"text: {PII_TEXT}", stage="x"))
    headers = dict(sent[1]["headers"])  # type: ignore[arg-type]
    assert b"bob.smith" not in sent[1]["value"] and b"[EMAIL]" in sent[1]["value"]  # type: ignore[operator]
    assert b"bob.smith" not in headers["convmon-detail"] and headers["convmon-original-bytes"] == str(len(raw)).encode()
    keep = DeadLetters(Topic(), metrics, keep_raw=True)  # type: ignore[arg-type]
    asyncio.run(keep.send(raw, b"k", reason="invalid_schema", detail=PII_TEXT, stage="x"))
    assert sent[2]["value"] == raw and dict(sent[2]["headers"])["convmon-redacted"] == b"false"  # type: ignore[arg-type]


# --- model artifacts are data, never code --------------------------------------------------------

class _Payload:
    """Unpickling this creates ``path``: proof that code ran."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (Path.touch, (self.path,))


def test_a_pickled_object_array_in_weights_is_refused(tmp_path: Path) -> None:
    registry = ModelRegistry(tmp_path / "models")
    version = registry.publish("distilled", {"coef": np.zeros((2, 3))}, {"format": 1}, promote=True)
    sentinel = tmp_path / "code-ran"
    weights = tmp_path / "models" / "distilled" / version / "weights.npz"
    evil = np.empty(1, dtype=object)
    evil[0] = _Payload(sentinel)
    np.savez(weights, coef=evil, intercept=np.zeros(2))
    with np.load(weights, allow_pickle=True) as data:  # control: the payload is live if pickles are allowed
        data["coef"]
    assert sentinel.exists()
    sentinel.unlink()

    with pytest.raises(ModelError, match="cannot load distilled/"):
        registry.load("distilled")
    assert not sentinel.exists()


def test_a_raw_pickle_disguised_as_weights_is_refused(tmp_path: Path) -> None:
    registry = ModelRegistry(tmp_path / "models")
    version = registry.publish("distilled", {"coef": np.zeros((2, 3))}, {"format": 1}, promote=True)
    sentinel = tmp_path / "code-ran"
    weights = tmp_path / "models" / "distilled" / version / "weights.npz"
    weights.write_bytes(pickle.dumps(_Payload(sentinel)))
    with pytest.raises(ModelError):
        registry.load("distilled")
    assert not sentinel.exists()


def test_manifest_fields_are_never_evaluated(tmp_path: Path) -> None:
    sentinel = tmp_path / "code-ran"
    code = f"__import__('pathlib').Path({str(sentinel)!r}).touch()"
    registry = ModelRegistry(tmp_path / "models")
    arrays = {"coef": np.zeros((1, 4), np.float32), "intercept": np.zeros(1), "platt_a": np.ones(1),
              "platt_b": np.zeros(1), "thresholds": np.full(1, 0.5)}
    manifest = {"format": 1, "rubric_key": code, "item_ids": [code], "untrained": {code: code}, "note": code,
                "featurizer": {"parts": [{"name": code, "params": {code: code}}]}}
    registry.publish("distilled", arrays, manifest, promote=True)
    loaded_arrays, loaded = registry.load("distilled")
    model = RubricModel.from_arrays(loaded_arrays, loaded)
    assert model.rubric_key == code and model.item_ids == [code] and model.info["note"] == code
    with pytest.raises(ConfigError, match="unknown featurizer"):
        featurizer_from_config(loaded["featurizer"])
    assert not sentinel.exists()


# --- a real worker: bind address, and no secret in any log or /metrics ---------------------------

@pytest.mark.integration
def test_worker_binds_metrics_to_the_configured_address_and_leaks_no_secret(
    broker: str, make_settings, tmp_path: Path
) -> None:
    """A worker on 127.0.0.2 with a fake API key (judge answering 500s), a SASL password in its
    settings, and INFO logging. (A PostgreSQL URL with a password: test_faults.py.)"""
    with OpenAIServer(default="500") as server:
        settings = make_settings(
            broker_url=f"kafka://{broker}", sample_rate=1.0, idle_timeout_s=2.0, metrics_host="127.0.0.2",
            openai_base_url=server.url, openai_api_key=FAKE_KEY, judge_max_retries=1, judge_backoff_base_s=0.05,
            judge_backoff_max_s=0.1, kafka_sasl_username="convmon", kafka_sasl_password=FAKE_SASL,
        )
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVMON_", "OPENAI_"))}
        env.update(settings_env(settings.model_copy(update={"metrics_port": port})))
        log_path = tmp_path / "worker.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "worker", "--verbose"], env=env,
                                    stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.2:{port}/metrics"
            wait_until(lambda: proc.poll() is None and httpx.get(url, timeout=1).status_code == 200, 60,
                       message=f"worker /metrics on 127.0.0.2 (log: {log_path})")
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=1)

            rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
            conversations = [ConversationGenerator(rubric, seed=3).generate(f"sec-{i}", time.time()) for i in range(3)]
            asyncio.run(produce_events(settings, [e for c in conversations for e in c.events]))

            def judged_and_failed() -> bool:
                return 'reason="judge_unavailable"' in httpx.get(url, timeout=2).text

            wait_until(judged_and_failed, 60, message="judge failures dead-lettered")
            metrics_text = httpx.get(url, timeout=2).text
            assert proc.poll() is None, log_path.read_text(errors="replace")[-3000:]
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    logs = log_path.read_text(errors="replace")
    assert "convmon_judge_requests_total" in metrics_text and len(server.requests) >= 2
    assert "judge" in logs  # the failures were logged: the grep below looks at real output
    for secret in (FAKE_KEY, FAKE_SASL):
        assert secret not in logs, f"{secret} leaked into the worker log"
        assert secret not in metrics_text, f"{secret} leaked into /metrics"
