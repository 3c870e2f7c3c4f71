"""charts/ebb, rendered by the real Helm (deploy/local/helm.sh), against the code it deploys (no cluster needed).

- `helm lint --strict` passes with the default values and with charts/ebb/ci/*-values.yaml; values.schema.json
  refuses what the services would refuse (an unknown mode or provider, a replica count for the cluster-watcher).
- deploy/kubernetes/ is the chart rendered (`deploy/local/helm.sh manifests`), file for file: one source of
  truth. tests/deploy/test_manifests.py and tests/integration/test_manifests.py check those files against the
  code and the real API server, so they check the chart's default rendering.
- The values Karpenter's chart has are named as Karpenter names them (its chart's values.yaml, from the Go module
  deploy/local/karpenter.sh builds).
- With values unlike every default (charts/ebb/ci/nondefault-values.yaml), every variable a Deployment sets is still
  a setting of its service and parses; mode, provider, the cluster name, the existing Secrets and the image reach
  the services; the RBAC follows the provider and the mode (shadow: no write verb but the planner's Lease).
- ebb's own pods are protected: a PodDisruptionBudget per Deployment, karpenter.sh/do-not-disrupt, a required
  node affinity away from the nodes of NodePools, system-cluster-critical for the executor.
- The dashboards and the PrometheusRule the chart ships (dashboards.enabled, prometheusRule.enabled) are
  deploy/grafana's files: the chart's copies in charts/ebb/files/grafana/ equal them byte for byte
  (`deploy/local/helm.sh chart-files`, run by `make manifests`), and the rendered ConfigMaps and PrometheusRule hold
  what those files hold; the default values render neither.
- docs/deploy.md names every value.
"""

from __future__ import annotations

import filecmp
import importlib
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic_settings import BaseSettings

from tests.kit.helm import CHART, HELM_SH, REPO, helm, of_kind, render, values_file

CI_VALUES = CHART / "ci" / "nondefault-values.yaml"
MANIFEST_VALUES = CHART / "ci" / "manifests-values.yaml"
MONITORING_VALUES = CHART / "ci" / "monitoring-values.yaml"
GRAFANA = REPO / "deploy" / "grafana"
CHART_GRAFANA = CHART / "files" / "grafana"
#: fields of a pod's env that are no ebb setting
NOT_SETTINGS = {"PYTHONDONTWRITEBYTECODE"}
SAMPLES = {"database-url": "postgresql+asyncpg://ebb:secret@postgres.example:5432/ebb", "url":
           "postgresql+asyncpg://ebb:secret@postgres.example:5432/ebb", "api-token": "t" * 16,
           "write-token": "w" * 16, "api-read-token": "r" * 16, "bootstrap": "kafka-0.example:9092",
           "metadata.name": "pod-abc", "metadata.namespace": "ebb-system"}


@pytest.fixture(scope="module")
def default_docs() -> list[dict[str, Any]]:
    return render()


@pytest.fixture(scope="module")
def nondefault_docs() -> list[dict[str, Any]]:
    return render(release="prod", namespace="ebb-prod", value_files=[CI_VALUES])


# ------------------------------------------------------------------------------------------- lint, schema


@pytest.mark.parametrize("values", [None, MANIFEST_VALUES, CI_VALUES, MONITORING_VALUES],
                         ids=["default", "manifests", "nondefault", "monitoring"])
def test_helm_lint_strict(values: Path | None) -> None:
    args = ["lint", "--strict", str(CHART)] + (["--values", str(values)] if values else [])
    done = helm(*args)
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout, done.stdout


@pytest.mark.parametrize(("assignment", "message"), [
    ("mode=on", "/mode"), ("provider=aws", "/provider"), ("clusterWatcher.replicas=2", "replicas"),
    ("settings.clusterNmae=x", "clusterNmae"), ("image.digest=latest", "/image/digest"),
    ("dashboards.enabled=yes", "/dashboards/enabled"), ("prometheusRule.enabled=1", "/prometheusRule/enabled"),
    ("dashboards.labelValue=1", "/dashboards/labelValue"), ("dashboards.folder=ebb", "folder"),
    ("prometheusRule.additionalLabels=kps", "/prometheusRule/additionalLabels"),
    ("settings.maxReplacements=0", "/settings/maxReplacements"),
    ("settings.consolidationSearch=best", "/settings/consolidationSearch"),
])
def test_the_schema_refuses_values_the_services_would_not_run_with(assignment: str, message: str) -> None:
    done = helm("template", "ebb", str(CHART), "--set", assignment, check=False)
    assert done.returncode != 0 and message in done.stderr, done.stderr


# ------------------------------------------------------------------------------------------- one source of truth


def test_deploy_kubernetes_is_the_chart_rendered(tmp_path: Path) -> None:
    """`deploy/local/helm.sh manifests DIR` writes what deploy/kubernetes holds, file for file (run it after a change
    to the chart); only namespace.yaml and secret.template.yaml are not the chart's."""
    out = tmp_path / "kubernetes"
    subprocess.run([str(HELM_SH), "manifests", str(out)], check=True, capture_output=True, timeout=300)
    committed = REPO / "deploy" / "kubernetes"
    own = {"namespace.yaml", "secret.template.yaml"}
    generated = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.yaml"))
    present = sorted(p.relative_to(committed).as_posix() for p in committed.rglob("*.yaml")
                     if p.relative_to(committed).as_posix() not in own)
    assert generated == present
    stale = [name for name in generated if not filecmp.cmp(out / name, committed / name, shallow=False)]
    assert not stale, f"deploy/kubernetes is not the chart rendered: {stale}; run deploy/local/helm.sh manifests"
    for name in generated:
        assert (committed / name).read_text().startswith("# GENERATED from charts/ebb"), name


# ------------------------------------------------------------------------------------------- Karpenter's names


#: value paths ebb's chart shares with Karpenter's, meaning the same
KARPENTER_NAMES = ["nameOverride", "fullnameOverride", "additionalLabels", "additionalAnnotations",
                   "imagePullPolicy", "imagePullSecrets", "serviceMonitor.enabled", "serviceMonitor.additionalLabels",
                   "serviceMonitor.endpointConfig", "replicas", "revisionHistoryLimit", "podLabels", "podAnnotations",
                   "podDisruptionBudget.maxUnavailable", "podSecurityContext", "priorityClassName", "nodeSelector",
                   "affinity", "topologySpreadConstraints", "tolerations", "logLevel",
                   "settings.featureGates.spotToSpotConsolidation"]


def karpenter_values() -> dict[str, Any]:
    """Karpenter's chart's values.yaml (its KWOK provider's chart, from the Go module of deploy/local/lib.sh's
    KARPENTER_VERSION, which deploy/local/karpenter.sh builds)."""
    version = re.search(r'KARPENTER_VERSION="\$\{EBB_KARPENTER_VERSION:-(v[0-9.]+)\}"',
                        (REPO / "deploy" / "local" / "lib.sh").read_text())
    assert version
    done = subprocess.run(["go", "mod", "download", "-json", f"sigs.k8s.io/karpenter@{version.group(1)}"],
                          capture_output=True, text=True, check=True, timeout=600,
                          env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"})
    directory = Path(json.loads(done.stdout)["Dir"])
    loaded = yaml.safe_load((directory / "kwok" / "charts" / "values.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def lookup(values: dict[str, Any], path: str) -> tuple[bool, Any]:
    node: Any = values
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return False, None
        node = node[key]
    return True, node


def test_values_karpenter_has_are_named_as_karpenter_names_them() -> None:
    ours = yaml.safe_load((CHART / "values.yaml").read_text())
    theirs = karpenter_values()
    for path in KARPENTER_NAMES:
        found_ours, mine = lookup(ours, path)
        found_theirs, karpenters = lookup(theirs, path)
        assert found_ours, f"ebb's values have no {path}"
        assert found_theirs, f"Karpenter's chart has no {path}"
        if mine is not None and karpenters is not None:
            assert type(mine) is type(karpenters), f"{path}: {type(mine).__name__}, Karpenter's {type(karpenters)}"


# ------------------------------------------------------------------------------------------- the services' settings


def settings_class(package: str) -> type[BaseSettings]:
    cls = importlib.import_module(f"{package}.settings").Settings
    assert issubclass(cls, BaseSettings)
    return cls  # type: ignore[no-any-return]


def container_env(docs: list[dict[str, Any]], container: dict[str, Any]) -> dict[str, str]:
    configmaps = of_kind(docs, "ConfigMap")
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        env.update(configmaps[source["configMapRef"]["name"]]["data"])
    for var in container.get("env") or []:
        if "value" in var:
            env[var["name"]] = var["value"]
        elif "secretKeyRef" in var["valueFrom"]:
            env[var["name"]] = SAMPLES[var["valueFrom"]["secretKeyRef"]["key"]]
        else:
            env[var["name"]] = SAMPLES[var["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


@pytest.mark.parametrize("which", ["default", "nondefault"])
def test_every_variable_is_a_setting_its_service_parses(which: str, request: pytest.FixtureRequest,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    docs: list[dict[str, Any]] = request.getfixturevalue(f"{which}_docs")
    deployments = of_kind(docs, "Deployment")
    assert len(deployments) == (4 if which == "default" else 5)  # the ingester only with an interruption queue
    for deployment in deployments.values():
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        cls = settings_class(container["command"][2])
        prefix = str(cls.model_config.get("env_prefix"))
        env = container_env(docs, container)
        known = {prefix + field.upper() for field in cls.model_fields}
        assert not set(env) - known - NOT_SETTINGS, f"{deployment['metadata']['name']}: {set(env) - known}"
        for var in [v for v in os.environ if v.startswith("EBB_")]:
            monkeypatch.delenv(var)
        for var, value in env.items():
            monkeypatch.setenv(var, value)
        cls()  # parses, or raises naming the variable


def test_nondefault_values_reach_the_services(nondefault_docs: list[dict[str, Any]]) -> None:
    config = {name: cm["data"] for name, cm in of_kind(nondefault_docs, "ConfigMap").items()}
    planner = config["prod-ebbx-consolidation-planner"]
    assert planner["EBB_CONSOLIDATION_PLANNER_MODE"] == "shadow"
    assert planner["EBB_CONSOLIDATION_PLANNER_CLUSTER"] == "prod-eu"
    assert planner["EBB_CONSOLIDATION_PLANNER_LEASE_NAME"] == "ebb-prod-eu-leader"
    assert planner["EBB_CONSOLIDATION_PLANNER_PASS_INTERVAL_SECONDS"] == "30"  # consolidationPlanner.config
    assert planner["EBB_CONSOLIDATION_PLANNER_INTERRUPTION_INGESTER"] == "true"
    assert planner["EBB_CONSOLIDATION_PLANNER_LOG_LEVEL"] == "debug"
    assert config["prod-ebbx-termination-executor"]["EBB_TERMINATION_EXECUTOR_MODE"] == "shadow"
    assert config["prod-ebbx-termination-executor"]["EBB_TERMINATION_EXECUTOR_PROVIDER"] == "kwok"
    assert config["prod-ebbx-engine-options"] == {"spotToSpot": "true", "provider": "kwok", "explain": "false",
                                                  "maxReplacements": "3", "consolidationSearch": "optimizer"}
    assert config["prod-ebbx-interruption-ingester"]["EBB_INTERRUPTION_INGESTER_QUEUE_NAME"] == "karpenter-prod-eu"
    assert all(value == "prod-eu." for data in config.values() for key, value in data.items()
               if key.endswith("_TOPIC_PREFIX"))
    # Kafka and the database from the existing Secrets: no bootstrap servers in any ConfigMap
    assert not [key for data in config.values() for key in data if key.endswith("_KAFKA_BOOTSTRAP")]
    deployments = of_kind(nondefault_docs, "Deployment")
    for deployment in deployments.values():
        pod = deployment["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["image"] == ("registry.example.internal/ebb:0.2.0@sha256:"
                                      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
        refs = {v["name"]: v["valueFrom"]["secretKeyRef"] for v in container["env"]
                if "secretKeyRef" in (v.get("valueFrom") or {})}
        assert {(r["name"], r["key"]) for n, r in refs.items() if n.endswith("_KAFKA_BOOTSTRAP")} == {
            ("ebb-kafka", "bootstrap")}
        assert {(r["name"], r["key"]) for n, r in refs.items() if n.endswith("_DATABASE_URL")} <= {("ebb-store", "url")}
    replicas = {name: d["spec"]["replicas"] for name, d in deployments.items()}
    assert replicas == {"prod-ebbx-cluster-watcher": 1, "prod-ebbx-consolidation-planner": 2,
                        "prod-ebbx-decisions-api": 3, "prod-ebbx-interruption-ingester": 2,
                        "prod-ebbx-termination-executor": 3}
    assert not of_kind(nondefault_docs, "Job")  # database.migrate: false
    assert not of_kind(nondefault_docs, "ServiceMonitor")


def test_the_servicemonitors_follow_the_values(tmp_path: Path) -> None:
    docs = render(value_files=[values_file({"serviceMonitor": {"enabled": True, "additionalLabels": {"release": "kps"},
                                                                "endpointConfig": {"interval": "15s"}}}, tmp_path)])
    monitors = of_kind(docs, "ServiceMonitor")
    assert sorted(monitors) == ["ebb-decisions-api", "ebb-metrics"]
    for monitor in monitors.values():
        assert monitor["metadata"]["labels"]["release"] == "kps"
        assert [e["interval"] for e in monitor["spec"]["endpoints"]] == ["15s"]


# ------------------------------------------------------------------------------------------- dashboards and alerts


def test_the_chart_ships_deploy_grafana_byte_for_byte() -> None:
    """Helm's .Files reads only inside the chart: charts/ebb/files/grafana/ holds copies of deploy/grafana/, the one
    source, and `deploy/local/helm.sh chart-files` (run by `make manifests`) refreshes them."""
    sources = sorted(p.name for p in GRAFANA.iterdir() if p.is_file())
    copies = sorted(p.name for p in CHART_GRAFANA.iterdir() if p.is_file())
    assert sources == copies, "charts/ebb/files/grafana is not deploy/grafana; run deploy/local/helm.sh chart-files"
    assert {"ebb-dashboard.json", "karpenter-capacity.json", "karpenter-performance.json", "ebb-rules.yaml"} <= set(
        sources)
    stale = [name for name in sources if (GRAFANA / name).read_bytes() != (CHART_GRAFANA / name).read_bytes()]
    assert not stale, f"charts/ebb/files/grafana differs from deploy/grafana: {stale}; run deploy/local/helm.sh " \
                      "chart-files"


@pytest.fixture(scope="module")
def monitoring_docs() -> list[dict[str, Any]]:
    return render(value_files=[MONITORING_VALUES])


def test_the_dashboards_are_deploy_grafanas_in_configmaps_for_grafanas_sidecar(
        monitoring_docs: list[dict[str, Any]]) -> None:
    values = yaml.safe_load(MONITORING_VALUES.read_text())["dashboards"]
    dashboards = {name: cm for name, cm in of_kind(monitoring_docs, "ConfigMap").items()
                  if values["label"] in cm["metadata"]["labels"]}
    files = sorted(GRAFANA.glob("*.json"))
    assert sorted(dashboards) == sorted(
        "ebb-dashboard-" + p.stem.removesuffix("-dashboard") for p in files)
    by_key: dict[str, str] = {}
    for configmap in dashboards.values():
        metadata = configmap["metadata"]
        assert metadata["labels"][values["label"]] == values["labelValue"]
        assert metadata["labels"]["release"] == "kps"
        assert metadata["annotations"]["grafana_folder"] == "ebb"
        assert metadata["namespace"] == values["namespace"]
        ((key, text),) = configmap["data"].items()  # one dashboard each: the sidecar writes each key to a file
        by_key[key] = text
    for path in files:
        assert json.loads(by_key[path.name]) == json.loads(path.read_text()), path.name
        assert by_key[path.name] == path.read_text(), f"{path.name}: not byte for byte"


def test_the_prometheusrule_is_deploy_grafanas_rules(monitoring_docs: list[dict[str, Any]]) -> None:
    rules = of_kind(monitoring_docs, "PrometheusRule")
    assert list(rules) == ["ebb-alerts"]
    (rule,) = rules.values()
    source = yaml.safe_load((GRAFANA / "ebb-rules.yaml").read_text())
    assert rule["apiVersion"] == source["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["spec"]["groups"] == source["spec"]["groups"]
    assert rule["spec"] == source["spec"]
    assert rule["metadata"]["labels"]["release"] == "kps"
    assert rule["metadata"]["namespace"] == "ebb-system"
    # the rules' own templates reach Prometheus unrendered
    assert any("{{ $labels." in text for group in rule["spec"]["groups"] for r in group["rules"]
               for text in (r.get("annotations") or {}).values())


def test_the_dashboards_follow_the_sidecars_default_label() -> None:
    docs = render(sets=["dashboards.enabled=true"])
    dashboards = [cm for cm in of_kind(docs, "ConfigMap").values() if "grafana_dashboard" in cm["metadata"]["labels"]]
    assert len(dashboards) == len(list(GRAFANA.glob("*.json")))
    assert {cm["metadata"]["labels"]["grafana_dashboard"] for cm in dashboards} == {"1"}
    assert {cm["metadata"]["namespace"] for cm in dashboards} == {"ebb-system"}
    assert not of_kind(docs, "PrometheusRule")


def test_the_defaults_render_no_dashboard_and_no_rule(default_docs: list[dict[str, Any]]) -> None:
    assert not of_kind(default_docs, "PrometheusRule")
    assert not [cm for cm in of_kind(default_docs, "ConfigMap").values()
                if any(key.endswith(".json") for key in cm.get("data") or {})
                or "grafana_dashboard" in cm["metadata"]["labels"]]


# ------------------------------------------------------------------------------------------- RBAC


def grants(docs: list[dict[str, Any]], account: str) -> set[tuple[str, str, str]]:
    """(group, resource, verb) every Role and ClusterRole bound to ``account`` grants (names ignored)."""
    roles = {(d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"] in ("Role", "ClusterRole")}
    out: set[tuple[str, str, str]] = set()
    for binding in [d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]:
        if any(s["name"] == account for s in binding["subjects"]):
            role = roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
            out |= {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
                    for v in rule["verbs"]}
    return out


@pytest.mark.parametrize(("provider", "node_verbs", "nodeclaims"), [
    ("karpenter", {"get", "patch"}, True), ("none", {"get", "patch", "delete"}, False),
    ("kwok", {"get", "list", "patch", "create", "delete"}, False)])
def test_the_executor_may_do_what_its_provider_does(provider: str, node_verbs: set[str], nodeclaims: bool) -> None:
    docs = render(sets=[f"provider={provider}"])
    granted = grants(docs, "ebb-termination-executor")
    assert {v for g, r, v in granted if (g, r) == ("", "nodes")} == node_verbs
    assert any(g == "karpenter.sh" and r == "nodeclaims" for g, r, _ in granted) is nodeclaims
    # a terminationGracePeriod's deadline deletes pods (with grace) on every provider; no write on pods otherwise
    assert {v for g, r, v in granted if (g, r) == ("", "pods")} == {"get", "list", "delete"}
    assert of_kind(docs, "ConfigMap")["ebb-engine-options"]["data"]["provider"] == provider


def test_shadow_mode_grants_no_write_but_the_planners_lease() -> None:
    enforce, shadow = render(), render(sets=["mode=shadow"])
    writes = {"create", "update", "patch", "delete"}
    for account in ("ebb-consolidation-planner", "ebb-termination-executor", "ebb-cluster-watcher"):
        written = {(g, r, v) for g, r, v in grants(shadow, account) if v in writes}
        assert written <= {("coordination.k8s.io", "leases", "create"), ("coordination.k8s.io", "leases", "update")}, \
            account
    assert grants(shadow, "ebb-termination-executor") == set()
    assert of_kind(shadow, "ServiceAccount")["ebb-termination-executor"]["automountServiceAccountToken"] is False
    assert ("", "nodes", "patch") in grants(enforce, "ebb-consolidation-planner")
    assert ("", "events", "create") in grants(enforce, "ebb-consolidation-planner")


# ------------------------------------------------------------------------------------------- ebb's own pods


@pytest.mark.parametrize("which", ["default", "nondefault"])
def test_ebbs_own_pods_are_protected(which: str, request: pytest.FixtureRequest) -> None:
    docs: list[dict[str, Any]] = request.getfixturevalue(f"{which}_docs")
    budgets = of_kind(docs, "PodDisruptionBudget")
    for name, deployment in of_kind(docs, "Deployment").items():
        template = deployment["spec"]["template"]
        labels = template["metadata"]["labels"]
        assert [b for b in budgets.values() if b["spec"]["selector"]["matchLabels"].items() <= labels.items()], \
            f"{name}: no PodDisruptionBudget"
        assert template["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true", name
        terms = template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"} in [
            e for t in terms["nodeSelectorTerms"] for e in t["matchExpressions"]], name
        for constraint in template["spec"]["topologySpreadConstraints"]:
            assert constraint["labelSelector"]["matchLabels"].items() <= labels.items()
        if name.endswith("termination-executor"):
            assert template["spec"]["priorityClassName"] == "system-cluster-critical"


# ------------------------------------------------------------------------------------------- the docs


def test_docs_deploy_names_every_value() -> None:
    """docs/deploy.md's values table names every value of values.yaml (top-level, and the keys of the maps that are
    the chart's own: settings, kafka, database, image, podDisruptionBudget, serviceMonitor, the services)."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    page = (REPO / "docs" / "deploy.md").read_text()
    named = set(re.findall(r"`([A-Za-z<>.]+)", page))
    documented = {part for name in named for part in name.split(".")}
    own_maps = {"settings", "kafka", "database", "image", "podDisruptionBudget", "serviceMonitor", "clusterWatcher",
                "consolidationPlanner", "terminationExecutor", "decisionsApi", "interruptionIngester", "planReader",
                "dashboards", "prometheusRule"}
    missing = [key for key in values if key not in documented]
    missing += [f"{key}.{sub}" for key in own_maps & set(values) for sub in values[key] if sub not in documented]
    assert not missing, f"docs/deploy.md does not name: {missing}"
