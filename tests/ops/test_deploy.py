"""deploy/: the Kubernetes manifests pass the Kubernetes schemas, compose.yaml and the Dockerfile
say what deploy/README.md promises, and every setting of the voice runtime is in the examples and
the README. No container engine runs here: they are parsed and checked."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tenancy.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S_VERSIONS = ["1.29", kubernetes_validate.utils.latest_version()]
APP_UID = 10001
PLACEHOLDER = re.compile(r"change-?me|placeholder|example", re.IGNORECASE)
SECRET_NAME = re.compile(r"PASSWORD|SECRET|PEPPER|TOKEN|API_KEY", re.IGNORECASE)
# ${VAR}, ${VAR:?message} or ${VAR:-} (empty default): supplied by the operator, never the file.
OPERATOR_SUPPLIED = re.compile(r"^\$\{[A-Z_]+(:\?[^}]*|:-)?\}$")
URL_PASSWORD = re.compile(r"://[^:/@\s]+:([^@\s]+)@")
# How long the voice runtime lets running calls go on after SIGTERM, by default.
VOICE_GRACE = int(Settings.model_fields["voice_shutdown_grace_seconds"].default)
# The settings calls and the voice runtime added (CONTRACT 6, 9): each is in the examples.
CALL_SETTINGS = re.compile(
    r"^(SWITCHBOARD_(VOICE|RECORDINGS|SANDBOX_WEBHOOK|[A-Z]+_BASE_URL)"
    r"|TWILIO_)"
)


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
    assert {d["kind"] for d in documents} >= {
        "Deployment",
        "HorizontalPodAutoscaler",
        "Job",
        "ConfigMap",
        "Secret",
    }
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
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "switchboard-api",
    }
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
    pods = [
        _one("Deployment", "switchboard-api"),
        _one("Deployment", "switchboard-worker"),
        _one("Deployment", "switchboard-voice"),
        _one("Job", "switchboard-migrate"),
    ]
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


def _pod_spec(kind: str, name: str) -> dict[str, Any]:
    return _one(kind, name)["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def test_voice_deployment_probes_health_and_outlasts_the_call_grace() -> None:
    voice = _one("Deployment", "switchboard-voice")
    container = _container(voice)
    assert container["args"] == ["voice", "--host", "0.0.0.0", "--port", "8100"]
    assert container["ports"] == [{"name": "http", "containerPort": 8100}]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    # SIGKILL only after the preStop wait and the runtime's own grace for running calls.
    pod = voice["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] > int(pre_stop[1]) + VOICE_GRACE
    assert pod["securityContext"]["runAsUser"] == APP_UID
    # Through PgBouncer, like the API (no LISTEN session).
    assert _database_url_source(container) == "DATABASE_URL"


def test_voice_service_carries_the_websocket_where_the_worker_dials() -> None:
    service = _one("Service", "switchboard-voice")
    voice = _one("Deployment", "switchboard-voice")
    assert service["spec"]["selector"] == voice["spec"]["selector"]["matchLabels"]
    [port] = service["spec"]["ports"]
    assert port["targetPort"] == "http"
    config = _one("ConfigMap", "switchboard-config")["data"]
    assert config["SWITCHBOARD_VOICE_URL"] == f"ws://switchboard-voice:{port['port']}"
    assert config["SWITCHBOARD_VOICE_PUBLIC_URL"].startswith("https://")


def test_api_and_voice_pods_share_a_recordings_store() -> None:
    config = _one("ConfigMap", "switchboard-config")["data"]
    # Each pod has its own /tmp: files written by a voice pod would never reach the API's.
    assert config["SWITCHBOARD_RECORDINGS"] == "s3"
    assert config["SWITCHBOARD_RECORDINGS_S3_BUCKET"]
    secret = _one("Secret", "switchboard-secrets")["stringData"]
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(secret)


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
    assert set(services) == {"postgres", "redis", "pgbouncer", "migrate", "api", "worker", "voice"}
    for name in ("postgres", "redis", "pgbouncer", "api", "worker", "voice"):
        check = services[name]["healthcheck"]
        assert check.get("disable") is not True and check["test"], name
    assert "/healthz" in json.dumps(services["api"]["healthcheck"]["test"])
    assert "8100/health'" in json.dumps(services["voice"]["healthcheck"]["test"])
    # The image's HEALTHCHECK probes HTTP, which the one-shot migration does not serve.
    assert services["migrate"]["healthcheck"] == {"disable": True}


def test_compose_runs_migrate_to_completion_before_api_worker_and_voice() -> None:
    services = _compose()["services"]
    assert services["migrate"]["command"][0] == "migrate"
    assert services["migrate"]["restart"] == "no"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("api", "worker", "voice"):
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


def test_compose_voice_runs_the_runtime_the_worker_dials() -> None:
    services = _compose()["services"]
    voice = services["voice"]
    assert voice["command"] == ["voice", "--host", "0.0.0.0", "--port", "8100"]
    assert _environment(services["worker"])["SWITCHBOARD_VOICE_URL"] == "ws://voice:8100"
    assert "@pgbouncer:" in _environment(voice)["DATABASE_URL"]
    assert voice["depends_on"]["pgbouncer"]["condition"] == "service_healthy"
    # The worker signs the call tokens the runtime checks.
    assert (
        _environment(voice)["SWITCHBOARD_KEY_PEPPER"]
        == _environment(services["worker"])["SWITCHBOARD_KEY_PEPPER"]
    )
    assert {"SWITCHBOARD_VOICE_PUBLIC_URL", "TWILIO_AUTH_TOKEN"} <= set(_environment(voice))
    grace = voice["stop_grace_period"]
    assert grace.endswith("s") and int(grace[:-1]) > VOICE_GRACE


def test_compose_api_worker_and_voice_share_the_recordings_volume() -> None:
    services = _compose()["services"]
    for name in ("api", "worker", "voice"):
        environment = _environment(services[name])
        assert environment["SWITCHBOARD_RECORDINGS"] == "${SWITCHBOARD_RECORDINGS:-file}", name
        assert f"recordings:{environment['SWITCHBOARD_DATA_DIR']}" in services[name]["volumes"]
    assert "recordings" in _compose()["volumes"]


def test_compose_builds_the_dockerfile_from_the_repository_root() -> None:
    for name in ("migrate", "api", "worker", "voice"):
        build = _compose()["services"][name]["build"]
        assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == (
            DEPLOY / "Dockerfile"
        ).resolve()


def test_compose_hard_codes_no_secret() -> None:
    found = []
    for name, service in _compose()["services"].items():
        for key, value in _environment(service).items():
            password = URL_PASSWORD.search(value)
            if password and not OPERATOR_SUPPLIED.match(password.group(1)):
                found.append(f"{name}.{key}: password in URL")
            if SECRET_NAME.search(key) and not (
                OPERATOR_SUPPLIED.match(value) or PLACEHOLDER.search(value)
            ):
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


def test_dockerfile_installs_the_cli_and_the_voice_runtime() -> None:
    builder = _stages()[0]
    copies = {args.split()[0] for keyword, args in builder if keyword == "COPY"}
    assert {"cli", "voice"} <= copies
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    assert {"!cli/**", "!voice/**"} <= set(ignore)
    # The ambience beds and the sandbox's recordings are package data: the wheel carries them.
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]
    assert package_data["voice"] == ["ambience/*.wav"]
    assert package_data["integrations"] == ["telephony/sandbox_audio/*"]


# --- settings in the examples and the README ----------------------------------------------------


def _aliases() -> list[str]:
    return [field.alias for field in Settings.model_fields.values() if field.alias]


def test_every_call_setting_is_in_the_compose_and_kubernetes_examples() -> None:
    compose = (DEPLOY / "compose.yaml").read_text() + (DEPLOY / ".env.example").read_text()
    k8s = "".join(path.read_text() for path in sorted((DEPLOY / "k8s").glob("*.yaml")))
    settings = [alias for alias in _aliases() if CALL_SETTINGS.match(alias)]
    assert len(settings) >= 16
    assert [s for s in settings if s not in compose] == []
    assert [s for s in settings if s not in k8s] == []


def _readme_names() -> set[str]:
    """Every variable the README's settings tables name; `_SUFFIX` after a full name in the
    same cell is short for that name with its last parts replaced."""
    names: set[str] = set()
    for line in (ROOT / "README.md").read_text().splitlines():
        if not line.startswith("| `"):
            continue
        cell = line.split("|")[1]
        full: list[str] = []
        for token in re.findall(r"`([A-Z0-9_*]+)`", cell):
            if token.startswith("_") and full:
                parts = full[-1].split("_")
                names.update("_".join(parts[:n]) + token for n in range(1, len(parts)))
            else:
                full.append(token)
                names.add(token)
    return names


def test_every_setting_is_in_the_readme() -> None:
    documented = _readme_names()
    assert [alias for alias in _aliases() if alias not in documented] == []
