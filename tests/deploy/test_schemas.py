"""docker-compose.yml against the Compose specification, deploy/k8s against Kubernetes' schemas.

Both validators run offline: check-jsonschema ships the Compose spec's schema (``vendor.compose-spec``),
kubernetes-validate ships the Kubernetes OpenAPI schemas per version. KEDA's kinds are custom
resources, checked against the CRD schemas of KEDA v2.20.2 kept in ``schemas/`` (Apache-2.0,
from kedacore/keda config/crd/bases). Validation is strict: an unknown field is an error, as with
``kubectl apply --validate=strict``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from monitor.contracts.settings import REPO_ROOT

K8S_DIR = REPO_ROOT / "deploy" / "k8s"
SCHEMAS = Path(__file__).parent / "schemas"
MANIFESTS = sorted(p for p in K8S_DIR.glob("*.yaml") if p.name != "kustomization.yaml")
KUBERNETES_VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]  # oldest we support, newest known
CUSTOM = {"keda.sh/v1alpha1": {"ScaledObject": "keda.sh_scaledobjects.yaml",
                               "TriggerAuthentication": "keda.sh_triggerauthentications.yaml"}}


def check_compose(path: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("check-jsonschema")
    return subprocess.run([str(exe), "--builtin-schema", "vendor.compose-spec", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_compose_file_matches_the_compose_specification() -> None:
    result = check_compose(REPO_ROOT / "docker-compose.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_validation_rejects_an_unknown_service_key(tmp_path: Path) -> None:
    compose = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    compose["services"]["worker-1"]["comand"] = compose["services"]["worker-1"].pop("command")
    bad = tmp_path / "docker-compose.yml"
    bad.write_text(yaml.safe_dump(compose))
    result = check_compose(bad)
    assert result.returncode == 1 and "comand" in result.stdout, result.stdout + result.stderr


def documents() -> list[tuple[str, dict[str, Any]]]:
    return [(f"{p.name}/{d['kind']}/{d['metadata']['name']}", d)
            for p in MANIFESTS for d in yaml.safe_load_all(p.read_text()) if d]


def strict(schema: Any) -> Any:
    """A CRD's openAPIV3Schema with unknown fields rejected, as the API server's strict field validation does."""
    if isinstance(schema, dict):
        schema = {k: strict(v) for k, v in schema.items()}
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def crd_validator(api_version: str, kind: str) -> jsonschema.Draft7Validator:
    crd = yaml.safe_load((SCHEMAS / CUSTOM[api_version][kind]).read_text())
    version = api_version.split("/")[1]
    served = next(v for v in crd["spec"]["versions"] if v["name"] == version and v["served"])
    schema = strict(served["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = {"type": "object"}  # ObjectMeta: checked by kubernetes-validate's rules
    return jsonschema.Draft7Validator(schema)


def validate(doc: dict[str, Any], version: str) -> None:
    custom = CUSTOM.get(doc["apiVersion"], {})
    if doc["kind"] in custom:
        errors = sorted(crd_validator(doc["apiVersion"], doc["kind"]).iter_errors(doc), key=str)
        assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)
    else:
        kubernetes_validate.validate(doc, version, strict=True)  # raises on any error or unknown kind


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize(("name", "doc"), documents(), ids=[n for n, _ in documents()])
def test_manifest_matches_its_schema(name: str, doc: dict[str, Any], version: str) -> None:
    validate(doc, version)


def test_manifests_cover_what_platform_teams_expect() -> None:
    kinds = {doc["kind"] for _, doc in documents()}
    assert {"Namespace", "Secret", "ConfigMap", "PersistentVolumeClaim", "Deployment", "Service",
            "PodDisruptionBudget", "CronJob", "ScaledObject", "TriggerAuthentication"} <= kinds


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d["spec"]["template"]["spec"]["containers"][0].update(imagePullPolice="Always"), "imagePullPolice"),
    (lambda d: d["spec"]["template"]["spec"]["containers"][0]["resources"].update(limits={"memory": []}), "memory"),
], ids=["unknown-field", "wrong-type"])
def test_kubernetes_validation_rejects_a_broken_deployment(mutate: Any, message: str) -> None:
    doc = next(d for _, d in documents() if d["kind"] == "Deployment")
    mutate(doc)
    with pytest.raises(kubernetes_validate.ValidationError, match=message):
        validate(doc, KUBERNETES_VERSIONS[-1])


def test_crd_validation_rejects_a_broken_scaled_object() -> None:
    doc = next(d for _, d in documents() if d["kind"] == "ScaledObject")
    doc["spec"]["maxReplicas"] = doc["spec"].pop("maxReplicaCount")
    with pytest.raises(AssertionError, match="maxReplicas"):
        validate(doc, KUBERNETES_VERSIONS[-1])


def test_an_unknown_kind_is_an_error_not_a_pass() -> None:
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        validate({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}, "1.29.0")


def test_kustomization_applies_every_manifest_but_the_example_secret() -> None:
    kustomization = yaml.safe_load((K8S_DIR / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(p.name for p in MANIFESTS if p.name != "secret.yaml")
    assert kustomization["resources"][0] == "namespace.yaml"
