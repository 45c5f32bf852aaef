"""deploy/: the Kubernetes manifests pass the Kubernetes schemas, compose.yaml and the Dockerfile
say what deploy/README.md promises. No container engine runs here: they are parsed and checked."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S_VERSIONS = ["1.29", kubernetes_validate.utils.latest_version()]
APP_UID = 10001
PLACEHOLDER = re.compile(r"change-?me|placeholder|example", re.IGNORECASE)
SECRET_NAME = re.compile(r"PASSWORD|SECRET|PEPPER|TOKEN|API_KEY", re.IGNORECASE)
# ${VAR}, ${VAR:?message} or ${VAR:-} (empty default): supplied by the operator, never the file.
OPERATOR_SUPPLIED = re.compile(r"^\$\{[A-Z_]+(:\?[^}]*|:-)?\}$")
URL_PASSWORD = re.compile(r"://[^:/@\s]+:([^@\s]+)@")


# --- Kubernetes -------------------------------------------------------------------------------


def _manifests() -> list[dict[str, Any]]:
    documents = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        documents.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return documents


def _one(kind: str, name: str) -> dict[str, Any]:
    found = [d for d in _manifests() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]  # type: ignore[no-any-return]


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_manifest_passes_the_kubernetes_schema_strictly(version: str) -> None:
    documents = _manifests()
    assert {d["kind"] for d in documents} >= {"Deployment", "HorizontalPodAutoscaler", "Job",
                                              "ConfigMap", "Secret"}
    for document in documents:
        # Strict: an unknown or misspelt field is an error, not silently dropped.
        kubernetes_validate.validate(document, version, strict=True)


def test_api_deployment_has_probes_resources_and_runs_as_the_image_user() -> None:
    api = _one("Deployment", "switchboard-api")
    container = _container(api)
    assert container["args"][:3] == ["serve", "--host", "0.0.0.0"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    pod = api["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == APP_UID
    assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_hpa_scales_the_api_deployment_on_cpu() -> None:
    hpa = _one("HorizontalPodAutoscaler", "switchboard-api")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": "switchboard-api"}
    assert 1 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"


def _database_url_source(container: dict[str, Any], name: str = "DATABASE_URL") -> str:
    for variable in container.get("env", []):
        if variable["name"] == name:
            return str(variable["valueFrom"]["secretKeyRef"]["key"])
    return name  # from the Secret through envFrom


def test_worker_and_migrate_connect_directly_and_the_api_through_pgbouncer() -> None:
    secret = _one("Secret", "switchboard-secrets")["stringData"]
    assert "@pgbouncer:" in secret["DATABASE_URL"]
    assert "@postgres:" in secret["DATABASE_DIRECT_URL"]
    worker = _container(_one("Deployment", "switchboard-worker"))
    assert worker["args"] == ["worker"]
    assert _database_url_source(worker) == "DATABASE_DIRECT_URL"
    job = _one("Job", "switchboard-migrate")
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    migrate = job["spec"]["template"]["spec"]["containers"][0]
    assert migrate["args"][0] == "migrate"
    assert _database_url_source(migrate) == "DATABASE_DIRECT_URL"
    api = _container(_one("Deployment", "switchboard-api"))
    assert _database_url_source(api) == "DATABASE_URL"
    # Its key-cache listener holds a LISTEN session: PostgreSQL itself.
    assert _database_url_source(api, "SWITCHBOARD_DIRECT_DATABASE_URL") == "DATABASE_DIRECT_URL"


def test_pods_read_the_configmap_and_secret_that_exist_and_share_one_image() -> None:
    config = _one("ConfigMap", "switchboard-config")
    secret = _one("Secret", "switchboard-secrets")
    pods = [_one("Deployment", "switchboard-api"), _one("Deployment", "switchboard-worker"),
            _one("Job", "switchboard-migrate")]
    images = set()
    for pod in pods:
        container = pod["spec"]["template"]["spec"]["containers"][0]
        images.add(container["image"])
        sources = {next(iter(ref.values()))["name"] for ref in container["envFrom"]}
        assert sources == {config["metadata"]["name"], secret["metadata"]["name"]}
    assert len(images) == 1


def test_example_secret_holds_placeholders_only() -> None:
    secret = _one("Secret", "switchboard-secrets")
    assert "data" not in secret  # base64 would hide what is in it
    for key, value in secret["stringData"].items():
        password = URL_PASSWORD.search(value)
        assert PLACEHOLDER.search(password.group(1) if password else value), key


def test_configmap_holds_no_secret() -> None:
    config = _one("ConfigMap", "switchboard-config")["data"]
    assert not [key for key in config if SECRET_NAME.search(key)]
    assert not [key for key, value in config.items() if URL_PASSWORD.search(value)]


# --- compose ----------------------------------------------------------------------------------


def _compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())  # type: ignore[no-any-return]


def _environment(service: dict[str, Any]) -> dict[str, str]:
    environment = service.get("environment", {})
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) for item in environment)
    return {key: str(value) for key, value in environment.items()}


def test_compose_has_every_service_with_a_healthcheck() -> None:
    services = _compose()["services"]
    assert set(services) == {"postgres", "redis", "pgbouncer", "migrate", "api", "worker"}
    for name in ("postgres", "redis", "pgbouncer", "api", "worker"):
        check = services[name]["healthcheck"]
        assert check.get("disable") is not True and check["test"], name
    assert "/healthz" in json.dumps(services["api"]["healthcheck"]["test"])
    # The image's HEALTHCHECK probes HTTP, which the one-shot migration does not serve.
    assert services["migrate"]["healthcheck"] == {"disable": True}


def test_compose_runs_migrate_to_completion_before_api_and_worker() -> None:
    services = _compose()["services"]
    assert services["migrate"]["command"][0] == "migrate"
    assert services["migrate"]["restart"] == "no"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("api", "worker"):
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
        assert depends["redis"]["condition"] == "service_healthy", name
    assert services["api"]["depends_on"]["pgbouncer"]["condition"] == "service_healthy"
    assert services["pgbouncer"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["api"]["command"][:3] == ["serve", "--host", "0.0.0.0"]
    assert services["worker"]["command"] == ["worker"]


def test_compose_api_uses_pgbouncer_in_transaction_mode_and_worker_goes_direct() -> None:
    services = _compose()["services"]
    bouncer = _environment(services["pgbouncer"])
    assert bouncer["POOL_MODE"] == "transaction"
    assert int(bouncer["MAX_PREPARED_STATEMENTS"]) > 0  # asyncpg prepares its statements
    port = bouncer["LISTEN_PORT"]
    assert f"@pgbouncer:{port}/" in _environment(services["api"])["DATABASE_URL"]
    assert "@postgres:5432/" in _environment(services["worker"])["DATABASE_URL"]
    assert "@postgres:5432/" in _environment(services["migrate"])["DATABASE_URL"]
    # The API's key-cache listener holds a LISTEN session: PostgreSQL itself.
    assert "@postgres:5432/" in _environment(services["api"])["SWITCHBOARD_DIRECT_DATABASE_URL"]


def test_compose_builds_the_dockerfile_from_the_repository_root() -> None:
    for name in ("migrate", "api", "worker"):
        build = _compose()["services"][name]["build"]
        assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == \
            (DEPLOY / "Dockerfile").resolve()


def test_compose_hard_codes_no_secret() -> None:
    found = []
    for name, service in _compose()["services"].items():
        for key, value in _environment(service).items():
            password = URL_PASSWORD.search(value)
            if password and not OPERATOR_SUPPLIED.match(password.group(1)):
                found.append(f"{name}.{key}: password in URL")
            if SECRET_NAME.search(key) and not (OPERATOR_SUPPLIED.match(value)
                                                or PLACEHOLDER.search(value)):
                found.append(f"{name}.{key}")
    assert found == []


def test_compose_env_example_has_placeholders_only() -> None:
    lines = (DEPLOY / ".env.example").read_text().splitlines()
    values = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    for key in ("POSTGRES_PASSWORD", "SWITCHBOARD_KEY_PEPPER", "SWITCHBOARD_SECRETS_KEY"):
        assert PLACEHOLDER.search(values[key]), key


# --- Dockerfile -------------------------------------------------------------------------------


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in (DEPLOY / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, arguments = line.partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
    return instructions


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for instruction in _instructions():
        if instruction[0] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


def test_dockerfile_is_multi_stage_with_a_slim_runtime() -> None:
    stages = _stages()
    assert len(stages) >= 2
    builder, runtime = stages[0], stages[-1]
    assert builder[0][1].endswith("AS builder")
    assert runtime[0][1].split()[0] == "python:3.11-slim"
    builder_runs = " ".join(args for keyword, args in builder if keyword == "RUN")
    assert "venv /opt/venv" in builder_runs and "pip install" in builder_runs
    copies = [args for keyword, args in runtime if keyword == "COPY"]
    assert copies == ["--from=builder /opt/venv /opt/venv"]  # only the venv, no build tools


def test_dockerfile_runs_as_a_non_root_user_with_a_healthcheck_and_entrypoint() -> None:
    runtime = _stages()[-1]
    users = [args for keyword, args in runtime if keyword == "USER"]
    assert users, "no USER in the runtime stage"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0") and int(user) == APP_UID
    healthchecks = [args for keyword, args in runtime if keyword == "HEALTHCHECK"]
    assert len(healthchecks) == 1 and "/healthz" in healthchecks[0]
    entrypoint = [args for keyword, args in runtime if keyword == "ENTRYPOINT"]
    assert [json.loads(args) for args in entrypoint] == [["switchboard"]]
    command = [json.loads(args) for keyword, args in runtime if keyword == "CMD"]
    assert command[-1][:3] == ["serve", "--host", "0.0.0.0"]
