"""The deployment files, checked offline: docker-compose.yml against the Compose Specification's JSON
schema, every Kubernetes manifest against the API schema of a pinned Kubernetes version (strict: an
unknown field is an error), the Dockerfile's stages and user, and what the files must mean to run:
names that resolve, secrets referenced and never written, probes, non-root pods, the sandbox's
relaxations on the tools worker alone, agentrt commands the CLI accepts. The Kubernetes workers are
per build: deploy/scripts/worker-build.sh renders them for two builds side by side, as during a
rollout, and each build's objects are checked with the shared ones (versioned pods, selectors that
keep the builds apart, an HPA and PodDisruptionBudgets per build). The one-shot jobs (store migration,
Temporal setup) run for real, against PostgreSQL and a Temporal dev server; the `temporal` commands
the runbook gives are ones the installed CLI accepts.

The Compose schema is the one the ``check-jsonschema`` package vendors (compose-spec/compose-spec's
``schema/compose-spec.json``); the Kubernetes schemas are ``kubernetes-validate``'s offline ones.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator, Iterator
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import kubernetes_validate
import psycopg
import pytest
import yaml
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

import agentrt.store
from agentrt.cli import app
from agentrt.worker import SEARCH_ATTRIBUTES, AgentrtConfig, DevServer
from tests._packages import REPO_ROOT, package_dirs
from tests._pg import create_temp_database, drop_database

# The oldest Kubernetes the manifests are for: user namespaces (the tools worker's hostUsers: false)
# are on by default from 1.33.
KUBERNETES_VERSION = "1.33.0"
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
DEPLOY = REPO_ROOT / "deploy"
K8S = DEPLOY / "k8s"
DOCKERFILE = DEPLOY / "Dockerfile"
SETUP_SCRIPT = DEPLOY / "scripts" / "temporal-setup.sh"
WORKER_BUILD_SCRIPT = DEPLOY / "scripts" / "worker-build.sh"
WORKER_BUILD = K8S / "worker-build"
RUNBOOK = DEPLOY / "RUNBOOK.md"
VERSION = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
AGENTRT_IMAGE = f"agentrt:{VERSION}"
# The Worker Deployment the workers poll as a version of (AGENTRT_DEPLOYMENT), as the runbook names it.
WORKER_DEPLOYMENT = "agentrt"
VERSION_LABEL = "app.kubernetes.io/version"
# Two builds live at once, as in a rollout: the release, and a next one whose id is not a name as it is
# (upper case, '_' and '.': its objects' names use it lower-cased, with '-').
BUILDS = {
    VERSION: f"registry.example.com/team/agentrt:{VERSION}",
    "2026.12.06_RC1": "registry.example.com/team/agentrt@sha256:" + "0" * 64,
}

# Environment variables whose value is a secret: passwords, tokens, keys.
SECRET_NAME = re.compile(r"PASSWORD|PASSWD|_PWD$|TOKEN|SECRET|API_KEY|_KEYS?$|CREDENTIAL")
# A Compose interpolation that brings a value from the environment, with no default or an empty one
# (a non-empty default would be the secret written down).
INTERPOLATION = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::?\?[^}]*|:?-)?\}")
URL_PASSWORD = re.compile(r"://[^/:@\s]+:(.*)@")
# The variable a [[gateway.webhooks]] secret_env names in the deployment: only the gateway signs.
WEBHOOK_SECRET_ENV = "AGENTRT_WEBHOOK_SECRET"
# A test key for configurations that need codec keys: 32 bytes, base64.
CODEC_ENV = {
    "AGENTRT_CODEC_KEYS": "test-key:" + base64.b64encode(bytes(range(32))).decode(),
    "AGENTRT_CODEC_CURRENT_KEY": "test-key",
}


# --- reading the files ---------------------------------------------------------------------------------


def load_compose() -> dict[str, Any]:
    """docker-compose.yml as Compose reads it before interpolation (anchors and merge keys resolved)."""
    return yaml.safe_load(COMPOSE_FILE.read_text())


@cache
def compose_schema() -> dict[str, Any]:
    """The Compose Specification's JSON schema, as the ``check-jsonschema`` package ships it."""
    try:
        import check_jsonschema  # noqa: F401
    except ModuleNotFoundError:
        pytest.fail("the Compose Specification schema comes with the check-jsonschema package (the dev extra)")
    text_ = resources.files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json").read_text()
    return json.loads(text_)


def compose_errors(document: dict[str, Any]) -> list[str]:
    """Where and why ``document`` breaks the Compose Specification (empty when it does not)."""
    schema = compose_schema()
    validator_class = jsonschema.validators.validator_for(schema)
    validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


def services() -> dict[str, dict[str, Any]]:
    return load_compose()["services"]


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as a mapping (Compose allows a list of NAME=VALUE too)."""
    env = service.get("environment", {})
    if isinstance(env, list):
        return dict(item.split("=", 1) for item in env)
    return {name: "" if value is None else str(value) for name, value in env.items()}


def resolved_environment(service: dict[str, Any], **given: str) -> dict[str, str]:
    """A service's environment after Compose's interpolation: ``given`` values (the codec keys by
    default), else an interpolation's default (``${VAR:-default}``), else ``x``."""
    given = {**CODEC_ENV, **given}

    def value(match: re.Match[str]) -> str:
        name, operator, default = match.group(1), match.group(2) or "", match.group(3) or ""
        if name in given:
            return given[name]
        return default if operator.endswith("-") else "x"

    pattern = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:?[-?])?([^}]*)\}")
    return {name: pattern.sub(value, raw) for name, raw in environment(service).items()}


def base_manifests() -> list[tuple[Path, dict[str, Any]]]:
    """Every Kubernetes object of deploy/k8s that every build shares (the kustomization aside), with its file."""
    found = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        found += [(path, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return found


def run_worker_build(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/sh", str(WORKER_BUILD_SCRIPT), *args], capture_output=True, text=True, timeout=60)


@cache
def _rendered_build(build_id: str, image: str) -> str:
    result = run_worker_build(build_id, image)
    assert result.returncode == 0, result.stderr
    return result.stdout


def build_manifests(build_id: str) -> list[dict[str, Any]]:
    """The objects of one build's workers, as ``worker-build.sh BUILD_ID IMAGE`` prints them for kubectl."""
    return [doc for doc in yaml.safe_load_all(_rendered_build(build_id, BUILDS[build_id])) if doc]


def manifests() -> list[tuple[Path, dict[str, Any]]]:
    """Every Kubernetes object of a deployment with the workers of two builds (``BUILDS``), with its
    file (the script's, for the builds' objects)."""
    return base_manifests() + [(WORKER_BUILD_SCRIPT, doc) for build in BUILDS for doc in build_manifests(build)]


def objects(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for _, doc in manifests() if doc["kind"] == kind}


def pods() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """``(kind/name, component, pod spec)`` of every Deployment and Job."""
    for _, doc in manifests():
        if doc["kind"] in ("Deployment", "Job"):
            where = f"{doc['kind']}/{doc['metadata']['name']}"
            yield where, doc["metadata"]["labels"]["app.kubernetes.io/component"], doc["spec"]["template"]["spec"]


def pod_specs() -> Iterator[tuple[str, dict[str, Any]]]:
    """``(kind/name, pod spec)`` of every Deployment and Job."""
    for where, _, spec in pods():
        yield where, spec


def workers(build_id: str) -> dict[str, dict[str, Any]]:
    """``{component: Deployment}`` of one build's workers (``worker``, ``tools-worker``)."""
    return {
        doc["metadata"]["labels"]["app.kubernetes.io/component"]: doc
        for doc in build_manifests(build_id)
        if doc["kind"] == "Deployment"
    }


def env_values(deployment: dict[str, Any]) -> dict[str, Any]:
    """The first container's environment: ``{name: value}``, or the ``valueFrom`` of those that have one."""
    (one,) = deployment["spec"]["template"]["spec"]["containers"]
    return {variable["name"]: variable.get("value", variable.get("valueFrom")) for variable in one.get("env", [])}


def container(kind: str, name: str) -> dict[str, Any]:
    (only,) = objects(kind)[name]["spec"]["template"]["spec"]["containers"]
    return only


def pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    return deployment["spec"]["template"]["metadata"]["labels"]


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def configmap_toml(tmp_path: Path) -> Path:
    """The ConfigMap's agentrt.toml, written to a file as the pods see it."""
    path = tmp_path / "agentrt.toml"
    path.write_text(objects("ConfigMap")["agentrt-config"]["data"]["agentrt.toml"])
    return path


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's build stages, each a list of ``(INSTRUCTION, arguments)``; what comes before
    the first FROM (global ARGs) is left out."""
    logical, current = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current += line.rstrip("\\").strip() + " "
        if not line.endswith("\\"):
            logical.append(current.strip())
            current = ""
    stages: list[list[tuple[str, str]]] = []
    for entry in logical:
        instruction, _, arguments = entry.partition(" ")
        if instruction.upper() == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((instruction.upper(), arguments.strip()))
    return stages


def dockerfile_global_args() -> dict[str, str]:
    args = {}
    for line in DOCKERFILE.read_text().splitlines():
        if line.startswith("FROM "):
            break
        if line.startswith("ARG ") and "=" in line:
            name, _, default = line[4:].partition("=")
            args[name.strip()] = default.strip()
    return args


# --- the Compose file ----------------------------------------------------------------------------------


def test_the_compose_file_follows_the_compose_specification() -> None:
    assert compose_errors(load_compose()) == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        pytest.param(("services", "worker", "restrat"), "always", id="misspelled-service-key"),
        pytest.param(
            ("services", "migrate", "depends_on", "postgres", "condition"), "service_ready", id="unknown-condition"
        ),
        pytest.param(("services", "temporal", "ports"), {"7233": "7233"}, id="ports-as-a-mapping"),
        pytest.param(("services", "postgres", "healthcheck", "retries"), [3], id="retries-as-a-list"),
    ],
)
def test_a_broken_compose_file_fails_the_compose_specification(path: tuple[str, ...], value: object) -> None:
    broken = load_compose()
    target = broken
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    errors = compose_errors(broken)
    assert errors, f"the schema let {'.'.join(path)} = {value!r} through"
    assert any(error.startswith("/".join(path[:2])) for error in errors), errors


def test_every_depends_on_in_the_compose_file_names_one_of_its_services() -> None:
    names = set(services())
    for name, service in services().items():
        needs = service.get("depends_on", {})
        assert set(needs) <= names, f"{name} depends on {set(needs) - names}"
        assert name not in needs


def test_the_worker_and_the_tools_worker_each_run_two_replicas() -> None:
    assert services()["worker"]["deploy"]["replicas"] == 2
    assert services()["tools-worker"]["deploy"]["replicas"] == 2
    assert services()["worker"]["command"][:3] == ["agentrt", "worker", "--models-only"]
    assert services()["tools-worker"]["command"][:3] == ["agentrt", "worker", "--tools-only"]


def test_the_temporal_ui_decodes_payloads_through_the_codec_servers_published_port() -> None:
    ui, codec = services()["temporal-ui"], services()["codec-server"]
    endpoint = urlsplit(environment(ui)["TEMPORAL_CODEC_ENDPOINT"])
    argv = codec["command"]
    listens_on = argv[argv.index("--port") + 1]
    # The browser calls the endpoint: it must be the host side of the codec server's published port.
    assert f"127.0.0.1:{endpoint.port}:{listens_on}" in codec["ports"]
    assert endpoint.hostname in ("localhost", "127.0.0.1")
    # ... from the UI's own origin, which the codec server must allow (CORS).
    ui_host_port = next(p.split(":")[1] for p in ui["ports"] if p.endswith(":8080"))
    origins = {argv[i + 1] for i, arg in enumerate(argv) if arg == "--ui-origin"}
    assert f"http://localhost:{ui_host_port}" in origins


def test_every_compose_image_is_pinned_to_a_version() -> None:
    for name, service in services().items():
        image = service["image"]
        repository, _, tag = image.rpartition(":")
        assert repository and "/" not in tag, f"{name}: {image} names no tag"
        assert tag != "latest" and re.search(r"\d+\.\d+", tag), f"{name}: {image} is not pinned to a version"
        if "build" in service:
            assert image == AGENTRT_IMAGE, f"{name} builds {image}, not the package's version {AGENTRT_IMAGE}"
            assert (REPO_ROOT / service["build"]["context"] / service["build"]["dockerfile"]).is_file()


def test_no_compose_secret_is_written_as_a_plain_value() -> None:
    for name, service in services().items():
        for variable, value in environment(service).items():
            if SECRET_NAME.search(variable):
                assert INTERPOLATION.fullmatch(value), f"{name}: {variable} holds a value instead of ${{{variable}}}"
            for password in URL_PASSWORD.findall(value):
                assert INTERPOLATION.fullmatch(password), f"{name}: {variable} has a password written in its URL"


def test_the_example_environment_file_holds_no_value() -> None:
    for line in (DEPLOY / "compose.env.example").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            assert re.fullmatch(r"[A-Z_][A-Z0-9_]*=", line), f"a value in compose.env.example: {line}"
    assert (DEPLOY / ".gitignore").read_text().split() == [".env"]


def test_only_the_compose_worker_gets_the_provider_keys() -> None:
    config = AgentrtConfig.load(DEPLOY / "compose" / "agentrt.toml", env=resolved_environment(services()["worker"]))
    keys = {profile.api_key_env for profile in config.profiles.values() if profile.api_key_env}
    assert keys
    assert keys <= set(environment(services()["worker"]))
    for name, service in services().items():
        if name != "worker":
            assert not keys & set(environment(service)), f"{name} gets a provider key"


def test_only_the_compose_gateway_gets_the_webhook_secret_and_starts_without_it() -> None:
    for name, service in services().items():
        if name == "gateway":
            # Optional: the shipped agentrt.toml has no webhook, so Compose must not demand it.
            assert environment(service)[WEBHOOK_SECRET_ENV] == "${AGENTRT_WEBHOOK_SECRET:-}"
        else:
            assert WEBHOOK_SECRET_ENV not in environment(service), f"{name} gets the webhook secret"


def test_the_sandbox_relaxations_apply_to_the_compose_tools_worker_alone() -> None:
    relaxed = {"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"}
    for name, service in services().items():
        options = set(service.get("security_opt", []))
        if name == "tools-worker":
            assert relaxed <= options
            assert "no-new-privileges:true" in options and service["cap_drop"] == ["ALL"]
        else:
            assert not relaxed & options, f"{name} runs with {relaxed & options}"


def test_the_codec_server_shares_no_network_with_the_workers() -> None:
    # It serves the UI without a token, so nothing a sandboxed command can reach may reach it.
    codec_networks = set(services()["codec-server"]["networks"])
    for name in ("worker", "tools-worker", "gateway"):
        assert not codec_networks & set(services()[name]["networks"]), name


def test_jaeger_runs_only_under_the_tracing_profile_and_receives_the_agentrt_services_telemetry() -> None:
    jaeger = services()["jaeger"]
    assert jaeger["profiles"] == ["tracing"]
    for name, service in services().items():
        assert "jaeger" not in service.get("depends_on", {}), f"{name} cannot start without the tracing profile"
    for name in ("worker", "tools-worker", "gateway"):
        service = services()[name]
        off = AgentrtConfig.load(DEPLOY / "compose" / "agentrt.toml", env=resolved_environment(service))
        assert off.telemetry.enabled is False, f"{name}: telemetry is on without AGENTRT_TELEMETRY=1"
        on = AgentrtConfig.load(
            DEPLOY / "compose" / "agentrt.toml", env=resolved_environment(service, AGENTRT_TELEMETRY="1")
        )
        endpoint = urlsplit(on.telemetry.otlp_endpoint or "")
        assert (endpoint.hostname, endpoint.port) == ("jaeger", 4318), name
        assert on.telemetry.service_name == f"agentrt-{name}"
        assert set(jaeger["networks"]) & set(service["networks"]), f"{name} cannot reach jaeger"
    assert "# AGENTRT_TELEMETRY=1" in (DEPLOY / "compose.env.example").read_text().splitlines()


def test_the_agentrt_services_wait_for_the_store_migration_and_the_temporal_setup() -> None:
    for name in ("worker", "tools-worker", "gateway"):
        needs = services()[name]["depends_on"]
        for one_shot in ("migrate", "temporal-setup"):
            assert needs[one_shot] == {"condition": "service_completed_successfully"}, name
    assert services()["temporal"]["depends_on"]["temporal-schema"]["condition"] == "service_completed_successfully"
    assert services()["temporal-schema"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "healthcheck" in services()["postgres"]


def test_the_compose_configuration_splits_models_and_tools_and_serves_the_gateway_on_its_published_port() -> None:
    config = AgentrtConfig.load(DEPLOY / "compose" / "agentrt.toml", env=resolved_environment(services()["gateway"]))
    assert config.tool_task_queue and config.tool_task_queue != config.task_queue
    assert config.temporal_address == "temporal:7233"
    assert config.payloads.driver == "store"
    assert config.gateway.host == "0.0.0.0"
    assert f"127.0.0.1:{config.gateway.port}:{config.gateway.port}" in services()["gateway"]["ports"]


# --- the Kubernetes manifests --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", sorted(p for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml"), ids=lambda p: p.name
)
def test_every_kubernetes_manifest_is_valid_for_the_pinned_kubernetes_version(path: Path) -> None:
    documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert len(documents) == 1, f"{path.name}: one object per file, as the kustomization lists them"
    kubernetes_validate.validate(documents[0], KUBERNETES_VERSION, strict=True)


def _misspelled_field(deployment: dict[str, Any]) -> None:
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "IfNotPresent"


def _replicas_as_text(deployment: dict[str, Any]) -> None:
    deployment["spec"]["replicas"] = "two"


def _no_containers(deployment: dict[str, Any]) -> None:
    del deployment["spec"]["template"]["spec"]["containers"]


def _probe_port_as_a_list(deployment: dict[str, Any]) -> None:
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"] = [8080]


@pytest.mark.parametrize(
    "breakage",
    [_misspelled_field, _replicas_as_text, _no_containers, _probe_port_as_a_list],
    ids=lambda f: f.__name__[1:],
)
def test_a_broken_kubernetes_manifest_fails_validation(breakage: Any) -> None:
    deployment = copy.deepcopy(objects("Deployment")["agentrt-gateway"])
    kubernetes_validate.validate(copy.deepcopy(deployment), KUBERNETES_VERSION, strict=True)
    breakage(deployment)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_the_kustomization_lists_every_manifest_and_only_those() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert kustomization["apiVersion"] == "kustomize.config.k8s.io/v1beta1"
    assert kustomization["kind"] == "Kustomization"
    listed = kustomization["resources"]
    assert len(listed) == len(set(listed))
    assert set(listed) == {p.name for p in K8S.glob("*.y*ml")} - {"kustomization.yaml"}
    namespace = kustomization["namespace"]
    assert objects("Namespace").keys() == {namespace}


def test_every_image_is_the_released_agentrt_version_and_each_builds_workers_run_the_builds_image() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    (image,) = kustomization["images"]
    assert image["name"] == "agentrt" and image["newTag"] == VERSION
    for path, doc in base_manifests():
        if doc["kind"] in ("Deployment", "Job"):
            for one in doc["spec"]["template"]["spec"]["containers"]:
                assert one["image"] == AGENTRT_IMAGE, path.name
                assert one["imagePullPolicy"] == "IfNotPresent", path.name
    for build_id, build_image in BUILDS.items():
        for component, deployment in workers(build_id).items():
            for one in deployment["spec"]["template"]["spec"]["containers"]:
                assert one["image"] == build_image, f"{build_id} {component}"
                assert one["imagePullPolicy"] == "IfNotPresent", f"{build_id} {component}"


def test_every_pod_runs_as_a_numeric_non_root_user_without_privileges() -> None:
    for where, spec in pod_specs():
        context = spec["securityContext"]
        assert context["runAsNonRoot"] is True, where
        assert isinstance(context["runAsUser"], int) and context["runAsUser"] > 0, where
        assert spec["automountServiceAccountToken"] is False, where
        for one in spec["containers"]:
            assert one["securityContext"]["allowPrivilegeEscalation"] is False, where
            assert one["securityContext"]["capabilities"]["drop"] == ["ALL"], where
            assert one["securityContext"]["readOnlyRootFilesystem"] is True, where
            assert one.get("args") and "command" not in one, f"{where}: `command` would replace tini, PID 1"


def test_the_sandbox_relaxations_apply_to_the_kubernetes_tools_worker_alone() -> None:
    for where, component, spec in pods():
        seccomp = spec["securityContext"]["seccompProfile"]["type"]
        proc_mount = spec["containers"][0]["securityContext"].get("procMount", "Default")
        if component == "tools-worker":
            assert seccomp == "Unconfined" and spec["securityContext"]["appArmorProfile"] == {"type": "Unconfined"}
            # An unmasked /proc is only allowed, and only safe, in a user namespace of the pod's own.
            assert proc_mount == "Unmasked" and spec["hostUsers"] is False
        else:
            assert seccomp == "RuntimeDefault", where
            assert proc_mount == "Default" and "appArmorProfile" not in spec["securityContext"], where


def test_the_gateway_and_the_codec_server_are_probed_on_healthz_at_a_declared_port() -> None:
    for name in ("agentrt-gateway", "agentrt-codec-server"):
        one = container("Deployment", name)
        ports = {port["name"] for port in one["ports"]}
        for probe in ("readinessProbe", "livenessProbe"):
            assert one[probe]["httpGet"]["path"] == "/healthz", name
            assert one[probe]["httpGet"]["port"] in ports, name


@pytest.mark.parametrize("build_id", sorted(BUILDS))
def test_each_build_has_an_hpa_that_scales_its_own_worker_deployment_on_cpu(build_id: str) -> None:
    (hpa,) = [doc for doc in build_manifests(build_id) if doc["kind"] == "HorizontalPodAutoscaler"]
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"]) == ("apps/v1", "Deployment")
    worker = workers(build_id)["worker"]
    assert target["name"] == worker["metadata"]["name"]
    assert worker["spec"]["template"]["spec"]["containers"][0]["args"][:3] == ["agentrt", "worker", "--models-only"]
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "Resource"] == ["cpu"]
    assert hpa["spec"]["minReplicas"] >= 2
    # Replicas belong to the HPA: a count in the Deployment would reset it on every apply.
    assert "replicas" not in worker["spec"]
    assert [h for h in objects("HorizontalPodAutoscaler").values() if h["spec"]["scaleTargetRef"] == target] == [hpa]


def test_each_pod_disruption_budget_covers_the_workers_or_tools_workers_of_exactly_one_build() -> None:
    # A drain must leave each build a poller: a session pinned to one build cannot run on another's.
    deployments = objects("Deployment")
    covered = []
    for name, pdb in objects("PodDisruptionBudget").items():
        matched = [
            d for d, dep in deployments.items() if selects(pdb["spec"]["selector"]["matchLabels"], pod_labels(dep))
        ]
        assert len(matched) == 1, f"{name} selects {matched}"
        assert pdb["spec"]["maxUnavailable"] == 1, name
        covered += matched
    expected = [w["metadata"]["name"] for build in BUILDS for w in workers(build).values()]
    assert sorted(covered) == sorted(expected) and len(expected) == 2 * len(BUILDS)


def test_each_service_selects_the_pods_of_one_deployment_on_a_named_port() -> None:
    deployments = objects("Deployment")
    for name, service in objects("Service").items():
        matched = [dep for dep in deployments.values() if selects(service["spec"]["selector"], pod_labels(dep))]
        assert len(matched) == 1, name
        ports = {p["name"] for p in matched[0]["spec"]["template"]["spec"]["containers"][0]["ports"]}
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports, name


def test_every_deployment_selects_only_its_own_pods_so_two_builds_stay_apart() -> None:
    deployments = objects("Deployment")
    for name, deployment in deployments.items():
        selector = deployment["spec"]["selector"]["matchLabels"]
        selected = [d for d, dep in deployments.items() if selects(selector, pod_labels(dep))]
        assert selected == [name], f"{name} selects the pods of {selected}"


# --- the workers of each build -------------------------------------------------------------------------


@pytest.mark.parametrize("build_id", sorted(BUILDS))
def test_every_object_of_a_build_is_valid_for_the_pinned_kubernetes_version(build_id: str) -> None:
    documents = build_manifests(build_id)
    templates = sorted(WORKER_BUILD.glob("*.yaml"))
    assert len(documents) == len(templates), "worker-build.sh prints every template of deploy/k8s/worker-build once"
    for doc in documents:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    kinds = sorted((doc["kind"], doc["metadata"]["labels"]["app.kubernetes.io/component"]) for doc in documents)
    assert kinds == [
        ("Deployment", "tools-worker"),
        ("Deployment", "worker"),
        ("HorizontalPodAutoscaler", "worker"),
        ("PodDisruptionBudget", "tools-worker"),
        ("PodDisruptionBudget", "worker"),
    ]


def test_the_worker_build_script_fills_in_every_placeholder_of_the_templates() -> None:
    placeholders = set()
    for template in WORKER_BUILD.glob("*.yaml"):
        placeholders |= set(re.findall(r"__[A-Z_]+__", template.read_text()))
    assert placeholders == {"__BUILD_ID__", "__BUILD_NAME__", "__IMAGE__"}
    for build_id, image in BUILDS.items():
        rendered = _rendered_build(build_id, image)
        assert not re.search(r"__[A-Z_]+__", rendered), build_id


@pytest.mark.parametrize("build_id", sorted(BUILDS))
def test_each_builds_workers_poll_as_that_version_of_the_agentrt_worker_deployment(build_id: str) -> None:
    name = build_id.lower().replace(".", "-").replace("_", "-")
    namespace = yaml.safe_load((K8S / "kustomization.yaml").read_text())["namespace"]
    found = workers(build_id)
    assert sorted(found) == ["tools-worker", "worker"]
    for component, deployment in found.items():
        assert deployment["metadata"]["name"] == f"agentrt-{component}-{name}"
        assert deployment["metadata"]["namespace"] == namespace, "kubectl apply -f puts it beside the shared objects"
        env = env_values(deployment)
        assert env["AGENTRT_DEPLOYMENT"] == WORKER_DEPLOYMENT and env["AGENTRT_BUILD_ID"] == build_id, component
        assert env["OTEL_RESOURCE_ATTRIBUTES"] == f"service.version={build_id}"
        for labels in (
            deployment["metadata"]["labels"],
            deployment["spec"]["selector"]["matchLabels"],
            pod_labels(deployment),
        ):
            assert labels[VERSION_LABEL] == build_id, component
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        assert "--deployment" not in args and "--build-id" not in args, "the version comes from the environment alone"
    for doc in build_manifests(build_id):
        assert doc["metadata"]["namespace"] == namespace
        assert doc["metadata"]["name"].endswith(f"-{name}")


def test_a_builds_label_finds_every_object_of_the_build_and_nothing_that_builds_share() -> None:
    # The runbook removes a drained build with `kubectl delete deployment,hpa,pdb -l
    # app.kubernetes.io/name=agentrt,app.kubernetes.io/version=OLD`.
    for build_id in BUILDS:
        selector = {"app.kubernetes.io/name": "agentrt", VERSION_LABEL: build_id}
        found = sorted(
            (doc["kind"], doc["metadata"]["name"])
            for _, doc in manifests()
            if doc["kind"] in ("Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget")
            and selects(selector, doc["metadata"]["labels"])
        )
        assert found == sorted((doc["kind"], doc["metadata"]["name"]) for doc in build_manifests(build_id))
    for path, doc in base_manifests():
        assert VERSION_LABEL not in doc["metadata"].get("labels", {}), f"{path.name} is shared by every build"


@pytest.mark.parametrize(
    ("build_id", "said"),
    [
        pytest.param("", "is not 1 to 63 letters", id="empty"),
        pytest.param("-0.2.0", "is not 1 to 63 letters", id="leading-dash"),
        pytest.param("0.2.0.", "is not 1 to 63 letters", id="trailing-dot"),
        pytest.param("0.2.0 rc1", "is not 1 to 63 letters", id="space"),
        pytest.param("0.2.0\nrc1", "is not 1 to 63 letters", id="newline"),
        pytest.param("0.2.0/rc1", "is not 1 to 63 letters", id="slash"),
        pytest.param("b" * 64, "longer than 63 characters", id="too-long"),
    ],
)
def test_the_worker_build_script_refuses_a_build_id_that_cannot_label_its_objects(build_id: str, said: str) -> None:
    result = run_worker_build(build_id, "registry.example.com/team/agentrt:0.2.0")
    assert result.returncode == 2 and said in result.stderr and result.stdout == ""


def test_the_worker_build_script_refuses_an_image_that_is_not_an_image_reference_and_wrong_arguments() -> None:
    for image in ("", "registry.example.com/agentrt:0.2.0|x", "agentrt:0.2.0 --privileged", "a&b"):
        result = run_worker_build("0.2.0", image)
        assert result.returncode == 2 and "is not an image reference" in result.stderr, image
    for args in ((), ("0.2.0",), ("0.2.0", "agentrt:0.2.0", "extra")):
        result = run_worker_build(*args)
        assert result.returncode == 2 and result.stderr.startswith("usage:"), args


# --- the runbook's temporal commands --------------------------------------------------------------------


def runbook_temporal_commands() -> list[tuple[str, list[str]]]:
    """``(subcommand, [--flags])`` of every `temporal ...` command in the runbook's code (fenced blocks
    and inline code), continuation lines joined."""
    text = RUNBOOK.read_text()
    fenced = re.compile(r"```[a-z]*\n(.*?)```", re.S)
    inline = re.findall(r"`([^`]+)`", fenced.sub("", text))
    code = fenced.findall(text) + [" ".join(span.split()) for span in inline]
    found: dict[str, set[str]] = {}
    for block in code:
        block = re.sub(r"\s*\\\n\s*", " ", block)
        for line in block.splitlines():
            for match in re.finditer(r"(?:^|[\s$(])temporal((?: [a-z][a-z-]*)+)([^|;)`]*)", line):
                command = match.group(1).strip()
                found.setdefault(command, set()).update(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", match.group(2)))
    return sorted((command, sorted(flags)) for command, flags in found.items())


def test_the_runbook_gives_the_worker_deployment_commands_of_a_rollout() -> None:
    commands = dict(runbook_temporal_commands())
    for command in ("describe-version", "set-current-version", "set-ramping-version"):
        assert f"worker deployment {command}" in commands, command
    assert {"--deployment-name", "--build-id", "--yes"} <= set(commands["worker deployment set-current-version"])
    # The drainage statuses `describe-version` reports: draining while runs pinned to the version are
    # open, then drained (a dev server with two builds of `agentrt worker` said so, text and JSON).
    text = " ".join(RUNBOOK.read_text().split())
    assert "`DrainageStatus draining`" in text and "`drained`" in text
    assert 'jq -r .drainageInfo.drainageStatus)" = drained' in text


@pytest.mark.parametrize(
    ("command", "flags"), runbook_temporal_commands(), ids=lambda v: v if isinstance(v, str) else "_"
)
def test_every_temporal_command_of_the_runbook_is_one_the_cli_accepts(command: str, flags: list[str]) -> None:
    temporal = str(Path(sys.executable).parent / "temporal")
    helped = subprocess.run([temporal, *command.split(), "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0, helped.stderr
    # An unknown subcommand prints its parent's help: the usage line names the command itself.
    assert re.search(rf"^  temporal {re.escape(command)} \[", helped.stdout, re.M), f"no command `temporal {command}`"
    global_flags = subprocess.run([temporal, "options"], capture_output=True, text=True, timeout=60).stdout
    for flag in flags:
        known = re.search(rf"(?<![\w-]){flag}(?![\w-])", helped.stdout + global_flags)
        assert known, f"`temporal {command}` has no {flag}"


def test_every_container_has_resource_requests_and_limits() -> None:
    for where, spec in pod_specs():
        for one in spec["containers"]:
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(one["resources"][bound]), f"{where}: {bound}"


def test_secrets_are_referenced_by_name_and_never_written_in_the_manifests(tmp_path: Path) -> None:
    assert "Secret" not in {doc["kind"] for _, doc in manifests()}
    for where, spec in pod_specs():
        for one in spec["containers"]:
            for variable in one.get("env", []):
                if SECRET_NAME.search(variable["name"]):
                    assert "value" not in variable and "secretKeyRef" in variable["valueFrom"], (
                        f"{where}: {variable['name']}"
                    )
                assert not URL_PASSWORD.search(variable.get("value", "")), f"{where}: {variable['name']}"

    def walk(table: dict[str, Any]) -> Iterator[str]:
        for key, value in table.items():
            yield key
            if isinstance(value, dict):
                yield from walk(value)

    written = set(walk(tomllib.loads(configmap_toml(tmp_path).read_text())))
    assert not written & {"secret", "password", "token", "api_key", "url"}, written


def test_only_the_kubernetes_worker_gets_the_provider_keys(tmp_path: Path) -> None:
    config = AgentrtConfig.load(configmap_toml(tmp_path), env={**CODEC_ENV})
    keys = {profile.api_key_env for profile in config.profiles.values() if profile.api_key_env}
    assert keys
    for where, component, spec in pods():
        names = {variable["name"] for one in spec["containers"] for variable in one.get("env", [])}
        if component == "worker":
            assert keys <= names
        else:
            assert not keys & names, f"{where} gets a provider key"


def test_only_the_kubernetes_gateway_gets_the_webhook_secret_and_starts_without_it() -> None:
    for where, spec in pod_specs():
        env = {variable["name"]: variable for one in spec["containers"] for variable in one.get("env", [])}
        if where == "Deployment/agentrt-gateway":
            reference = env[WEBHOOK_SECRET_ENV]["valueFrom"]["secretKeyRef"]
            assert reference == {"name": "agentrt-gateway", "key": "webhook-secret", "optional": True}
        else:
            assert WEBHOOK_SECRET_ENV not in env, f"{where} gets the webhook secret"


def test_the_configmap_configuration_splits_models_and_tools_and_serves_the_gateway_on_its_container_port(
    tmp_path: Path,
) -> None:
    config = AgentrtConfig.load(configmap_toml(tmp_path), env={**CODEC_ENV})
    assert config.tool_task_queue and config.tool_task_queue != config.task_queue
    assert config.payloads.driver == "store"
    assert config.gateway.host == "0.0.0.0"
    (port,) = container("Deployment", "agentrt-gateway")["ports"]
    assert port["containerPort"] == config.gateway.port


def test_the_pods_read_the_configmaps_agentrt_toml_where_agentrt_config_points() -> None:
    for where, spec in pod_specs():
        one = spec["containers"][0]
        config_path = next(v["value"] for v in one["env"] if v["name"] == "AGENTRT_CONFIG")
        mount = next(m for m in one["volumeMounts"] if m["name"] == "config")
        volume = next(v for v in spec["volumes"] if v["name"] == "config")
        assert volume["configMap"]["name"] == "agentrt-config", where
        (item,) = volume["configMap"]["items"]
        assert config_path == f"{mount['mountPath']}/{item['path']}", where


# --- the commands the deployment runs ------------------------------------------------------------------


def agentrt_commands() -> list[list[str]]:
    """Every distinct `agentrt ...` command line of the Compose file and the manifests."""
    found = [s["command"] for s in services().values() if isinstance(s.get("command"), list)]
    found += [one["args"] for _, spec in pod_specs() for one in spec["containers"]]
    unique = {tuple(argv) for argv in found if argv[0] == "agentrt"}
    return [list(argv) for argv in sorted(unique)]


@pytest.mark.parametrize("argv", agentrt_commands(), ids=lambda argv: " ".join(argv[1:]))
def test_every_agentrt_command_of_the_deployment_is_one_the_cli_accepts(argv: list[str]) -> None:
    # --help is eager: the command line is parsed (an unknown option fails), nothing runs. In this
    # process (the console script itself is run by tests/cli/test_cli_process.py).
    result = CliRunner().invoke(app, [*argv[1:], "--help"], env={"COLUMNS": "300", "NO_COLOR": "1"}, terminal_width=300)
    assert result.exit_code == 0, f"{shlex.join(argv)}: {result.output}"
    if argv[1] == "worker":
        # The Kubernetes workers give their version in these variables alone (no --deployment, --build-id).
        versioned = {name for build in BUILDS for w in workers(build).values() for name in env_values(w)}
        for variable in ("AGENTRT_DEPLOYMENT", "AGENTRT_BUILD_ID"):
            assert variable in versioned and f"[env var: {variable}]" in result.stdout, variable


def migration_command() -> list[str]:
    (job,) = [spec for where, spec in pod_specs() if where == "Job/agentrt-migrate"]
    argv = job["containers"][0]["args"]
    assert argv == services()["migrate"]["command"], "Compose and Kubernetes migrate the store alike"
    assert argv == ["agentrt", "store", "migrate"]
    return [str(Path(sys.executable).parent / "agentrt"), *argv[1:]]


@pytest.fixture
def fresh_postgres() -> Iterator[str]:
    try:
        url = create_temp_database()
    except psycopg.OperationalError as err:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required in CI: {err}")
        pytest.skip(f"PostgreSQL unavailable: {err}")
    yield url
    drop_database(url)


@pytest.mark.postgres
def test_the_migration_job_brings_a_new_postgres_database_to_the_latest_schema(
    fresh_postgres: str, tmp_path: Path
) -> None:
    env = {**os.environ, "AGENTRT_CONFIG": str(configmap_toml(tmp_path)), "AGENTRT_DATABASE_URL": fresh_postgres}
    result = subprocess.run(migration_command(), env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    head = agentrt.store.head_revision()
    engine = create_engine(fresh_postgres)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == head
    finally:
        engine.dispose()


def test_the_migration_job_fails_when_the_database_cannot_be_reached(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    env = {
        **os.environ,
        "AGENTRT_CONFIG": str(configmap_toml(tmp_path)),
        "AGENTRT_DATABASE_URL": f"postgresql+psycopg://agentrt@127.0.0.1:{closed_port}/agentrt?connect_timeout=5",
    }
    result = subprocess.run(migration_command(), env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"the store does not answer at postgresql+psycopg://agentrt@127.0.0.1:{closed_port}/agentrt" in result.stderr
    assert "schema" not in result.stdout


def test_the_search_attribute_job_and_the_compose_setup_run_the_images_setup_script() -> None:
    (job,) = [spec for where, spec in pod_specs() if where == "Job/agentrt-search-attributes"]
    assert job["containers"][0]["args"] == ["agentrt-temporal-setup"]
    assert services()["temporal-setup"]["command"] == ["agentrt-temporal-setup"]
    copies = [args for instruction, args in dockerfile_stages()[-1] if instruction == "COPY"]
    assert any(
        args.split()[-2:] == ["deploy/scripts/temporal-setup.sh", "/usr/local/bin/agentrt-temporal-setup"]
        for args in copies
    )


@pytest.fixture(scope="module")
async def bare_temporal(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    """A Temporal dev server whose namespace has none of agentrt's search attributes, as a new cluster."""
    server = DevServer.on_free_ports(tmp_path_factory.mktemp("bare-temporal"), search_attributes=False)
    await server.start()
    yield server
    server.stop()


def run_setup(server: DevServer, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The setup script as the image runs it: the pods' agentrt.toml, the server's address over it."""
    environment_ = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "AGENTRT_CONFIG": str(configmap_toml(tmp_path)),
        "AGENTRT_TEMPORAL_ADDRESS": server.address,
        "AGENTRT_SETUP_ATTEMPTS": "15",
        **env,
    }
    return subprocess.run(["/bin/sh", str(SETUP_SCRIPT)], env=environment_, capture_output=True, text=True, timeout=180)


def temporal_cli(server: DevServer, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).parent / "temporal"), *args, "--address", server.address]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def custom_attributes(server: DevServer, namespace: str = "default") -> dict[str, str]:
    """``{name: "Keyword" | "Int" | ...}`` of the namespace's custom search attributes."""
    listed = temporal_cli(server, "operator", "search-attribute", "list", "--namespace", namespace, "--output", "json")
    assert listed.returncode == 0, listed.stderr
    raw = json.loads(listed.stdout).get("customAttributes", {})
    return {name: kind.removeprefix("INDEXED_VALUE_TYPE_").title().replace("_", "") for name, kind in raw.items()}


async def test_the_search_attribute_job_registers_every_attribute_agentrt_writes(
    bare_temporal: DevServer, tmp_path: Path
) -> None:
    for name in (
        SEARCH_ATTRIBUTES.keys() & custom_attributes(bare_temporal).keys()
    ):  # as a new cluster, whatever ran before
        temporal_cli(bare_temporal, "operator", "search-attribute", "remove", "--name", name, "--yes")
    assert not SEARCH_ATTRIBUTES.keys() & custom_attributes(bare_temporal).keys()
    result = run_setup(bare_temporal, tmp_path)
    assert result.returncode == 0, result.stderr
    assert custom_attributes(bare_temporal) == SEARCH_ATTRIBUTES
    assert {
        "AgentKind",
        "AgentOwner",
        "AgentSessionStatus",
        "AgentProfile",
        "AgentPendingApprovals",
        "AgentSpendUsd",
    } <= set(SEARCH_ATTRIBUTES)


async def test_the_search_attribute_job_run_again_succeeds_and_changes_nothing(
    bare_temporal: DevServer, tmp_path: Path
) -> None:
    assert run_setup(bare_temporal, tmp_path).returncode == 0
    before = custom_attributes(bare_temporal)
    again = run_setup(bare_temporal, tmp_path)
    assert again.returncode == 0, again.stderr
    assert custom_attributes(bare_temporal) == before == SEARCH_ATTRIBUTES


async def test_the_temporal_setup_creates_a_missing_namespace_when_given_a_retention(
    bare_temporal: DevServer, tmp_path: Path
) -> None:
    result = run_setup(bare_temporal, tmp_path, AGENTRT_NAMESPACE="created-by-setup", AGENTRT_NAMESPACE_RETENTION="3d")
    assert result.returncode == 0, result.stderr
    assert "created namespace created-by-setup" in result.stdout
    assert custom_attributes(bare_temporal, "created-by-setup") == SEARCH_ATTRIBUTES


async def test_the_temporal_setup_refuses_a_missing_namespace_without_a_retention(
    bare_temporal: DevServer, tmp_path: Path
) -> None:
    result = run_setup(bare_temporal, tmp_path, AGENTRT_NAMESPACE="never-created")
    assert result.returncode == 1
    assert "namespace never-created does not exist" in result.stderr
    assert (
        temporal_cli(bare_temporal, "operator", "namespace", "describe", "--namespace", "never-created").returncode != 0
    )


async def test_the_search_attribute_job_fails_naming_an_attribute_registered_with_another_type(
    bare_temporal: DevServer, tmp_path: Path
) -> None:
    assert run_setup(bare_temporal, tmp_path).returncode == 0
    remove = ("operator", "search-attribute", "remove", "--name", "AgentProfile", "--yes")
    assert temporal_cli(bare_temporal, *remove).returncode == 0
    create_as_int = ("operator", "search-attribute", "create", "--name", "AgentProfile", "--type", "Int")
    assert temporal_cli(bare_temporal, *create_as_int).returncode == 0
    try:
        result = run_setup(bare_temporal, tmp_path)
        assert result.returncode == 1
        assert "AgentProfile must be a Keyword search attribute" in result.stderr
        assert custom_attributes(bare_temporal)["AgentProfile"] == "Int"  # left as it was, for an operator to decide
    finally:
        temporal_cli(bare_temporal, *remove)  # the other tests of this server start from agentrt's types


# --- the Dockerfile ------------------------------------------------------------------------------------


def test_the_dockerfile_builds_in_stages_and_runs_as_a_numeric_non_root_user() -> None:
    stages = dockerfile_stages()
    assert len(stages) >= 2
    builder_name = stages[0][0][1].split()[-1]
    runtime = stages[-1]
    assert any(i == "COPY" and f"--from={builder_name}" in a for i, a in runtime), (
        "the runtime copies the builder's venv"
    )
    users = [a for i, a in runtime if i == "USER"]
    assert users, "the runtime stage sets no USER: it would run as root"
    user, _, group = users[-1].partition(":")
    assert user.isdigit() and int(user) > 0, "a numeric uid lets Kubernetes' runAsNonRoot check it"
    assert group == "" or (group.isdigit() and int(group) > 0)
    for where, spec in pod_specs():
        assert spec["securityContext"]["runAsUser"] == int(user), where


def test_the_dockerfile_base_images_are_pinned() -> None:
    args = dockerfile_global_args()
    for stage in dockerfile_stages():
        base = stage[0][1].split()[0]
        base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base)
        name, _, tag = base.partition(":")
        assert tag and tag != "latest" and re.search(r"\d+\.\d+\.\d+", tag), base


def test_the_dockerfile_copies_every_package_folder_the_distribution_installs() -> None:
    copied = {
        source.rstrip("/")
        for instruction, args in dockerfile_stages()[0]
        if instruction == "COPY"
        for source in [a for a in args.split() if not a.startswith("--")][:-1]
    }
    assert set(package_dirs().values()) | {"pyproject.toml", "README.md"} <= copied
    # Every file the stages copy from the context exists and is let through the ignore file.
    allowed = {
        line[1:].rstrip("/")
        for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    for stage in dockerfile_stages():
        for instruction, args in stage:
            if instruction != "COPY" or "--from=" in args:
                continue
            sources = [a for a in args.split() if not a.startswith("--")][:-1]
            for source in sources:
                assert (REPO_ROOT / source).exists(), source
                assert any(source.rstrip("/") == a or source.startswith(a + "/") for a in allowed), (
                    f"{source} is ignored"
                )


def test_the_dockerfile_bakes_in_no_secret() -> None:
    for stage in dockerfile_stages():
        for instruction, args in stage:
            if instruction in ("ENV", "ARG"):
                names = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=", args) or [args.split()[0]]
                assert not any(SECRET_NAME.search(name.upper()) for name in names), f"{instruction} {args}"
            if instruction in ("COPY", "ADD"):
                assert ".env" not in args.split() and "secret" not in args.lower(), f"{instruction} {args}"


def _graceful_shutdown(argv: list[str]) -> float:
    assert "--graceful-shutdown" in argv, f"{argv}: a worker lets running calls finish when it is stopped"
    return float(argv[argv.index("--graceful-shutdown") + 1])


def test_every_worker_lets_running_calls_finish_within_the_time_its_stop_allows() -> None:
    counted = 0
    for where, spec in pod_specs():
        [one] = spec["containers"]
        if one["args"][:2] == ["agentrt", "worker"]:
            counted += 1
            assert _graceful_shutdown(one["args"]) < spec["terminationGracePeriodSeconds"], where
    for name, service in services().items():
        command = service.get("command")
        if isinstance(command, list) and command[:2] == ["agentrt", "worker"]:
            counted += 1
            grace = float(str(service["stop_grace_period"]).removesuffix("s"))
            assert _graceful_shutdown(command) < grace, name
    assert counted == 2 * len(BUILDS) + 2
