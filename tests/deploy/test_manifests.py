"""deploy/kubernetes/ read as plain YAML, against the code it deploys (no cluster needed).

- Every environment variable a Deployment or Job sets (literally, from its ConfigMap through envFrom, or
  from the Secret) is a setting of that service: its Settings' env prefix plus a field name; and the
  service's Settings accept the values the manifests give.
- Every Deployment runs ``python -m <package>`` of an existing module with a ``__main__``; the Job runs
  ``ebb db upgrade``, an existing CLI command reading EBB_DATABASE_URL.
- Ports, probes, Services and ServiceMonitors line up: a probe or Service names a container port, the
  port is the one the settings make the service listen on, every ServiceMonitor selects existing Services
  that have its endpoint ports, and every metrics port is scraped.
- Pods run as non-root with a read-only root filesystem, no privilege escalation and no capabilities.
- kustomization.yaml lists every manifest except the Secret template and monitoring/.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import SecretStr
from pydantic_settings import BaseSettings

from ebb.core.options import CONFIGMAP_NAME, parse_engine_options

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "deploy" / "kubernetes"
IMAGE_PREFIX = "ghcr.io/ebb-sh/ebb:"
#: variables a container may set that are no ebb setting
NOT_SETTINGS = {"PYTHONDONTWRITEBYTECODE"}
#: what the Secret template's placeholders stand for when the settings parse the manifests' values
SECRET_SAMPLES = {"database-url": "postgresql+asyncpg://ebb:secret@postgres.example:5432/ebb",
                  "api-token": "0123456789abcdef", "api-read-token": "fedcba9876543210"}
FIELD_SAMPLES = {"metadata.name": "ebb-consolidation-planner-7d9f-abcde", "metadata.namespace": "ebb-system"}


def load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def manifest_files() -> list[Path]:
    return sorted(p for p in MANIFESTS.rglob("*.yaml") if p.name != "kustomization.yaml")


DOCS: list[dict[str, Any]] = [d for p in manifest_files() for d in load(p)]


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in DOCS if d["kind"] == kind]


def named(kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    found = [d for d in of_kind(kind) if d["metadata"]["name"] == name
             and (namespace is None or d["metadata"].get("namespace") == namespace)]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


def workloads() -> Iterator[tuple[str, dict[str, Any]]]:
    """(``Kind namespace/name``, pod spec) of every Deployment and Job."""
    for doc in of_kind("Deployment") + of_kind("Job"):
        meta = doc["metadata"]
        yield f"{doc['kind']} {meta['namespace']}/{meta['name']}", doc["spec"]["template"]["spec"]


def deployments() -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in of_kind("Deployment")}


def package_of(container: dict[str, Any]) -> str:
    command = container["command"]
    assert command[:2] == ["python", "-m"] and len(command) == 3, command
    return str(command[2])


def settings_class(package: str) -> type[BaseSettings]:
    cls = importlib.import_module(f"{package}.settings").Settings
    assert issubclass(cls, BaseSettings)
    return cls  # type: ignore[no-any-return]


def container_env(namespace: str, container: dict[str, Any]) -> dict[str, str]:
    """Every variable the container gets, with its value (Secret and field references replaced by samples)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        assert set(source) == {"configMapRef"}, f"only ConfigMaps through envFrom: {source}"
        config = named("ConfigMap", source["configMapRef"]["name"], namespace)
        env.update({str(k): str(v) for k, v in (config.get("data") or {}).items()})
    for var in container.get("env") or []:
        if "value" in var:
            env[var["name"]] = str(var["value"])
        elif "secretKeyRef" in var["valueFrom"]:
            ref = var["valueFrom"]["secretKeyRef"]
            secret = named("Secret", ref["name"], namespace)
            assert ref["key"] in secret["stringData"], f"{var['name']}: the Secret has no key {ref['key']}"
            env[var["name"]] = SECRET_SAMPLES[ref["key"]]
        else:
            env[var["name"]] = FIELD_SAMPLES[var["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


# ------------------------------------------------------------------------------------------- commands


def test_five_services_one_deployment_each() -> None:
    assert sorted(deployments()) == [f"ebb-{s}" for s in (
        "cluster-watcher", "consolidation-planner", "decisions-api", "interruption-ingester", "termination-executor")]


@pytest.mark.parametrize("name", sorted(deployments()))
def test_deployment_runs_an_existing_service_module(name: str) -> None:
    (container,) = deployments()[name]["spec"]["template"]["spec"]["containers"]
    package = package_of(container)
    assert package == "ebb_" + name.removeprefix("ebb-").replace("-", "_")
    assert importlib.util.find_spec(package) is not None
    assert importlib.util.find_spec(f"{package}.__main__") is not None
    assert container["image"].startswith(IMAGE_PREFIX)


def test_migrations_job_runs_ebb_db_upgrade_with_the_url_it_reads() -> None:
    import typer.main

    from ebb_cli.main import app

    (job,) = of_kind("Job")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["ebb", "db", "upgrade"]
    assert container["image"].startswith(IMAGE_PREFIX)
    cli = typer.main.get_command(app)
    upgrade = cli.commands["db"].commands["upgrade"]  # type: ignore[attr-defined]
    envvars = {p.envvar for p in upgrade.params if getattr(p, "envvar", None)}
    env = container_env(job["metadata"]["namespace"], container)
    assert set(env) - NOT_SETTINGS == envvars == {"EBB_DATABASE_URL"}


# ------------------------------------------------------------------------------------------- settings


@pytest.mark.parametrize("name", sorted(deployments()))
def test_every_variable_is_a_setting_of_its_service(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    deployment = deployments()[name]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    cls = settings_class(package_of(container))
    prefix = str(cls.model_config.get("env_prefix"))
    expected_prefix = "EBB_" + name.removeprefix("ebb-").replace("-", "_").upper() + "_"
    assert prefix == expected_prefix
    known = {prefix + field.upper() for field in cls.model_fields}
    env = container_env(deployment["metadata"]["namespace"], container)
    unknown = sorted(set(env) - known - NOT_SETTINGS)
    assert not unknown, f"{name} sets variables its Settings do not have: {unknown}"
    # and the service reads them as given: only the manifest's EBB_ variables set, the Settings built
    for var in [v for v in os.environ if v.startswith("EBB_")]:
        monkeypatch.delenv(var)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    settings = cls()
    for var, value in env.items():
        if var in known:
            assert as_text(getattr(settings, var.removeprefix(prefix).lower()), value) == value, var


def as_text(value: Any, like: str) -> str:
    """A parsed setting written back the way the manifest spells it."""
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and float(like) == value:
        return like
    return str(value)


def test_secret_template_has_only_placeholders_and_every_key_used() -> None:
    (secret,) = of_kind("Secret")
    assert secret["metadata"]["name"] == "ebb"
    used = {var["valueFrom"]["secretKeyRef"]["key"]
            for _, pod in workloads() for c in pod["containers"] for var in c.get("env") or []
            if "secretKeyRef" in (var.get("valueFrom") or {})}
    assert used == set(secret["stringData"]) == {"database-url", "api-token", "api-read-token"}
    assert all("CHANGE-ME" in v for v in secret["stringData"].values())


def test_database_url_only_where_the_service_uses_a_database() -> None:
    """The planner, the executor and the API open the store; the other services never get its password."""
    with_db = sorted(name for name, d in deployments().items()
                     for c in d["spec"]["template"]["spec"]["containers"] for var in c.get("env") or []
                     if var["name"].endswith("_DATABASE_URL"))
    assert with_db == ["ebb-consolidation-planner", "ebb-decisions-api", "ebb-termination-executor"]


def test_planner_lease_matches_its_role() -> None:
    planner = deployments()["ebb-consolidation-planner"]
    assert planner["spec"]["replicas"] == 2
    (container,) = planner["spec"]["template"]["spec"]["containers"]
    env = {v["name"]: v for v in container["env"]}
    assert env["EBB_CONSOLIDATION_PLANNER_LEASE_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.namespace"
    config = named("ConfigMap", "ebb-consolidation-planner")
    role = named("Role", "ebb-consolidation-planner")
    assert role["metadata"]["namespace"] == planner["metadata"]["namespace"]
    named_rules = [r for r in role["rules"] if r.get("resourceNames")]
    assert [r["resourceNames"] for r in named_rules] == [[config["data"]["EBB_CONSOLIDATION_PLANNER_LEASE_NAME"]]]


# ------------------------------------------------------------------------------------------- ports


def container_ports(pod: dict[str, Any]) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for c in pod["containers"] for p in c.get("ports") or []}


@pytest.mark.parametrize("name", sorted(deployments()))
def test_ports_and_probes_match_the_settings(name: str) -> None:
    deployment = deployments()[name]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = container_env(deployment["metadata"]["namespace"], container)
    ports = container_ports(pod)
    listening = {v: int(env[k]) for k, v in (("EBB_DECISIONS_API_PORT", "http"),
                                              ("EBB_CLUSTER_WATCHER_METRICS_PORT", "metrics"),
                                              ("EBB_CONSOLIDATION_PLANNER_METRICS_PORT", "metrics"),
                                              ("EBB_INTERRUPTION_INGESTER_METRICS_PORT", "metrics"),
                                              ("EBB_TERMINATION_EXECUTOR_METRICS_PORT", "metrics"))
                 if k in env and int(env[k])}
    assert ports == listening, f"{name}: container ports {ports}, the settings listen on {listening}"
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        if probe in container:
            assert container[probe]["httpGet"]["port"] in ports, f"{name} {probe}"
    # every service: liveness on /healthz (the process answers), readiness on /readyz (its servers answer)
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz", name
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz", name


def test_decisions_api_serves_the_probed_and_scraped_paths() -> None:
    from starlette.routing import Match

    from ebb.adapters.store.decision_store import DecisionStore
    from ebb_decisions_api.app import create_app
    from ebb_decisions_api.settings import Settings

    app = create_app(Settings(token=SecretStr("t")), DecisionStore.from_url("sqlite+aiosqlite:///:memory:", "default"))
    # the routes are in routers (app.routes lists an included router, not its paths): ask the app itself
    served = {path for path in ("/healthz", "/readyz", "/metrics")
              if any(route.matches({"type": "http", "path": path, "method": "GET"})[0] is Match.FULL
                     for route in app.router.routes)}
    assert served == {"/healthz", "/readyz", "/metrics"}


def test_services_select_pods_with_their_target_ports() -> None:
    for service in of_kind("Service"):
        selector = service["spec"]["selector"]
        pods = [d["spec"]["template"] for d in of_kind("Deployment")
                if d["metadata"]["namespace"] == service["metadata"]["namespace"]
                and selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()]
        assert pods, f"Service {service['metadata']['name']} selects no pods"
        for pod in pods:
            ports = container_ports(pod["spec"])
            for port in service["spec"]["ports"]:
                assert ports.get(port["targetPort"]) == port["port"], (service["metadata"]["name"], port)


def test_servicemonitors_select_existing_services_and_scrape_every_metrics_port() -> None:
    monitors = of_kind("ServiceMonitor")
    assert monitors
    scraped: set[tuple[str, str]] = set()
    for monitor in monitors:
        assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
        namespaces = monitor["spec"]["namespaceSelector"]["matchNames"]
        labels = monitor["spec"]["selector"]["matchLabels"]
        services = [s for s in of_kind("Service") if s["metadata"]["namespace"] in namespaces
                    and labels.items() <= (s["metadata"].get("labels") or {}).items()]
        assert services, f"ServiceMonitor {monitor['metadata']['name']} selects no Service"
        for endpoint in monitor["spec"]["endpoints"]:
            assert endpoint["path"] == "/metrics"
            for service in services:
                names = {p["name"] for p in service["spec"]["ports"]}
                assert endpoint["port"] in names, (monitor["metadata"]["name"], service["metadata"]["name"])
                scraped.add((service["metadata"]["name"], endpoint["port"]))
    exposing = {(s["metadata"]["name"], p["name"]) for s in of_kind("Service") for p in s["spec"]["ports"]}
    assert exposing == scraped


# ------------------------------------------------------------------------------------------- pods


@pytest.mark.parametrize("ref", [r for r, _ in workloads()])
def test_pods_are_locked_down(ref: str) -> None:
    pod = dict(workloads())[ref]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert named("ServiceAccount", pod["serviceAccountName"])
    for container in pod["containers"]:
        context = container["securityContext"]
        assert context == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                           "capabilities": {"drop": ["ALL"]}}
        assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"]
        assert container["resources"]["limits"]["memory"]
        # /tmp is the one place a pod writes; anything else mounted (the engine options) is read only
        assert {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")} == {"/tmp"}


def test_accounts_without_api_access_get_no_token() -> None:
    """A ServiceAccount bound to no role does not get a token mounted: the ingester, the API, the Job."""
    bound = {s["name"] for b in of_kind("RoleBinding") + of_kind("ClusterRoleBinding") for s in b["subjects"]}
    for account in of_kind("ServiceAccount"):
        name = account["metadata"]["name"]
        assert (name in bound) != (account.get("automountServiceAccountToken") is False), name
    assert bound == {"ebb-cluster-watcher", "ebb-consolidation-planner", "ebb-termination-executor", "ebb-plan"}


def test_the_plan_reader_may_list_what_ebb_plan_live_reads_and_nothing_else() -> None:
    """ebb-plan-reader (plan-reader.yaml) grants `list` on exactly the kinds ebb.adapters.kube.read lists."""
    from ebb.adapters.kube.kinds import PLAN_KINDS

    (role,) = [r for r in of_kind("ClusterRole") if r["metadata"]["name"] == "ebb-plan-reader"]
    granted = {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}
    assert granted == {(spec.group, spec.plural, "list") for spec in PLAN_KINDS}


def test_no_rule_grants_wildcards_or_secrets() -> None:
    for role in of_kind("ClusterRole") + of_kind("Role"):
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], role["metadata"]["name"]
            assert "secrets" not in rule["resources"]


# ------------------------------------------------------------------------------------------- kustomize


def test_kustomization_lists_every_manifest_but_the_secret_template_and_monitoring() -> None:
    (kustomization,) = load(MANIFESTS / "kustomization.yaml")
    listed = {MANIFESTS / r for r in kustomization["resources"]}
    assert all(p.is_file() for p in listed)
    expected = {p for p in manifest_files() if p.name != "secret.template.yaml" and "monitoring" not in p.parts}
    assert listed == expected
    (monitoring,) = load(MANIFESTS / "monitoring" / "kustomization.yaml")
    assert {MANIFESTS / "monitoring" / r for r in monitoring["resources"]} == {
        p for p in manifest_files() if "monitoring" in p.parts}


def test_everything_namespaced_is_in_ebb_system_but_the_events_roles() -> None:
    cluster_scoped = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}
    for doc in DOCS:
        namespace = doc["metadata"].get("namespace")
        assert (namespace is None) == (doc["kind"] in cluster_scoped), doc["metadata"]["name"]
        if namespace not in (None, "ebb-system"):
            assert doc["kind"] in ("Role", "RoleBinding") and doc["metadata"]["name"].endswith("-events")
    assert [n["metadata"]["name"] for n in of_kind("Namespace")] == ["ebb-system"]
    # the planner's events go where its events Role is
    config = named("ConfigMap", "ebb-consolidation-planner")
    role = named("Role", "ebb-consolidation-planner-events")
    assert config["data"]["EBB_CONSOLIDATION_PLANNER_EVENTS_NAMESPACE"] == role["metadata"]["namespace"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]


def test_crds_are_structural_and_only_status_is_open() -> None:
    """ebb.sh/v1 kinds; no x-kubernetes-preserve-unknown-fields anywhere (unknown fields are refused)."""
    crds = of_kind("CustomResourceDefinition")
    assert sorted(c["spec"]["names"]["kind"] for c in crds) == ["DisruptionPolicy", "Hold", "InstanceTypeCatalog"]

    def walk(node: Any, path: str) -> Iterator[str]:
        if isinstance(node, dict):
            if node.get("x-kubernetes-preserve-unknown-fields"):
                yield path
            for key, value in node.items():
                yield from walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                yield from walk(value, f"{path}[{i}]")

    for crd in crds:
        assert crd["spec"]["group"] == "ebb.sh"
        assert [v["name"] for v in crd["spec"]["versions"]] == ["v1"]
        assert list(walk(crd["spec"]["versions"][0]["schema"], crd["metadata"]["name"])) == []


#: the kinds of Karpenter's CRDs (sigs.k8s.io/karpenter v1.14: karpenter.sh; the AWS and KWOK providers' NodeClasses)
KARPENTER_NAMES = {"nodepool", "nodepools", "nodeclaim", "nodeclaims", "nodeoverlay", "nodeoverlays",
                   "ec2nodeclass", "ec2nodeclasses", "kwoknodeclass", "kwoknodeclasses"}


def test_no_ebb_kind_clashes_with_karpenters() -> None:
    """`kubectl get nodepools` (nodeclaims, ...) must stay Karpenter's: no ebb.sh plural, singular, kind or short
    name is one of Karpenter's."""
    for crd in of_kind("CustomResourceDefinition"):
        names = crd["spec"]["names"]
        ours = {names["plural"], names["singular"], names["kind"].lower(), *names.get("shortNames", [])}
        assert not ours & KARPENTER_NAMES, crd["metadata"]["name"]


def test_the_watcher_may_watch_every_kind_it_is_told_to() -> None:
    """The cluster-watcher's ConfigMap names every kind ebb reads, and its ClusterRole grants get, list and
    watch on each of them (ebb.adapters.kube.kinds: group and plural), nothing more."""
    from ebb.adapters.kube.kinds import KINDS, kinds_named

    kinds = named("ConfigMap", "ebb-cluster-watcher")["data"]["EBB_CLUSTER_WATCHER_KINDS"].split(",")
    assert set(kinds) == set(KINDS)
    granted = {(group, resource) for rule in named("ClusterRole", "ebb-cluster-watcher")["rules"]
               for group in rule["apiGroups"] for resource in rule["resources"]
               if set(rule["verbs"]) == {"get", "list", "watch"}}
    all_rules = named("ClusterRole", "ebb-cluster-watcher")["rules"]
    assert all(set(rule["verbs"]) == {"get", "list", "watch"} for rule in all_rules)
    assert granted == {(spec.group, spec.plural) for spec in kinds_named(kinds)}


def test_the_disruption_policy_crd_and_the_parser_agree() -> None:
    """The CRD's spec fields are those the parser reads, and an object with only the CRD's defaults parses to
    the parser's defaults (no expiry: the CRD gives expireAfter no default)."""
    from ebb.core.model import DisruptionPolicy
    from ebb.core.snapshot import MAX_SAVING_PER_EVICTED_POD, parse_object

    crd = named("CustomResourceDefinition", "disruptionpolicies.ebb.sh")
    assert crd["spec"]["names"]["plural"] == "disruptionpolicies" and crd["spec"]["scope"] == "Cluster"
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert set(spec["properties"]) == {"consolidationPolicy", "consolidateAfter", "expireAfter", "stabilizationWindow",
                                       "minimumPriceImprovementPercent", "minimumSavingPerEvictedPod", "demandWindow",
                                       "budgets"}
    assert (spec["properties"]["minimumPriceImprovementPercent"]["minimum"],
            spec["properties"]["minimumPriceImprovementPercent"]["maximum"]) == (0, 100)  # as the parser's range
    assert (spec["properties"]["minimumSavingPerEvictedPod"]["minimum"],
            spec["properties"]["minimumSavingPerEvictedPod"]["maximum"]) == (0, MAX_SAVING_PER_EVICTED_POD)
    assert "default" not in spec["properties"]["expireAfter"]
    assert spec["properties"]["budgets"]["items"]["properties"]["reasons"]["items"]["enum"] == [
        "Underutilized", "Empty", "Drifted", "Expired"]
    defaulted = {name: field["default"] for name, field in spec["properties"].items() if "default" in field}
    doc = {"apiVersion": "ebb.sh/v1", "kind": "DisruptionPolicy", "metadata": {"name": "general"}, "spec": defaulted}
    assert parse_object(doc).value == DisruptionPolicy("general")


def test_the_planner_and_the_api_plan_for_the_executors_provider() -> None:
    """A planner told another provider than the executor's proposes nodes the executor cannot retire (no
    NodeClaim) or leaves alone nodes it could; the API's live plans follow the planner. Both read the provider from
    the one ConfigMap ebb-engine-options, which says the executor's."""
    provider = named("ConfigMap", "ebb-termination-executor")["data"]["EBB_TERMINATION_EXECUTOR_PROVIDER"]
    options = named("ConfigMap", "ebb-engine-options", "ebb-system")["data"]
    assert options["provider"] == provider
    assert parse_engine_options(options).require_nodeclaim is (provider == "karpenter")
    for service in ("consolidation-planner", "decisions-api"):
        assert not any(key.endswith(("_PROVIDER", "_SPOT_TO_SPOT")) for key in named(
            "ConfigMap", f"ebb-{service}")["data"]), f"{service} sets an engine option of its own"


@pytest.mark.parametrize("service", ["consolidation-planner", "decisions-api", "termination-executor"])
def test_the_services_that_run_the_engine_mount_the_engine_options_where_they_read_them(service: str) -> None:
    prefix = f"EBB_{service.upper().replace('-', '_')}_"
    path = named("ConfigMap", f"ebb-{service}")["data"][prefix + "ENGINE_OPTIONS"]
    pod = named("Deployment", f"ebb-{service}")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    [container] = pod["containers"]
    [mount] = [m for m in container["volumeMounts"] if m["mountPath"] == path]
    assert mount.get("readOnly") is True
    assert volumes[mount["name"]]["configMap"]["name"] == CONFIGMAP_NAME
