"""deploy/grafana/ against what ebb serves: ebb's dashboard, its alerts (a PrometheusRule) and Karpenter's two
published dashboards with the prefix swapped (docs/metrics.md).

What ebb serves is read from real registries, not from a list: the ``/metrics`` of a running ``ebb run
--api-port`` (the embedded mode: the planner's, the executor's and the decisions-api's metrics on one registry),
scraped once its decisions have run and terminated nodes, and the registries of the services the embedded mode does
not run (the cluster-watcher's, the interruption-ingester's and the readiness gauges every service serves on its
port).

- Every PromQL expression of the dashboards (panel targets and variable queries) and of the rules parses
  (``promql-parser``, Grafana's variables replaced by their values) and names only metrics ebb serves, with label
  matchers only on labels those metrics have; Karpenter's dashboards also read other exporters' metrics
  (controller-runtime's, node-exporter's), and nothing else.
- The embedded mode's ``/metrics`` has each service's metrics and the process's (build info, consumer lag).
- With a real Prometheus (Debian's ``prometheus``; ``.ci/run`` installs it) scraping the run, every panel query
  answers with series and every rule evaluates, except where the run exported no series of a metric it reads (the
  distributed mode's only, or another exporter's).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric

import ebb
from ebb.adapters.health import Readiness
from ebb_cluster_watcher.metrics import Metrics as WatcherMetrics
from ebb_interruption_ingester.ingester import Metrics as IngesterMetrics
from tests.kit.embedded_run import EmbeddedRun, embedded_run, families_of, has_samples, prometheus_scraping, query

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
EBB_DASHBOARD = GRAFANA / "ebb-dashboard.json"
KARPENTER_DASHBOARDS = (GRAFANA / "karpenter-capacity.json", GRAFANA / "karpenter-performance.json")
RULES = GRAFANA / "ebb-rules.yaml"

#: the Karpenter metrics of its dashboards that ebb does not serve, and why (none: ebb has the fact of each)
KARPENTER_NOT_SERVED: dict[str, str] = {}
#: what Karpenter's dashboards read from other exporters (controller-runtime's reconcile metrics, node-exporter's)
OTHER_EXPORTERS = ("controller_runtime_", "node_")
#: Grafana's interval variables, in the expressions checked (a Prometheus scraping every second has two samples)
INTERVALS = {"__rate_interval": "1m", "__interval": "1m", "__range": "1m"}


# ------------------------------------------------------------------------------------------ the expressions


def _variable_values(dashboard: dict[str, Any]) -> dict[str, str]:
    """Each template variable's value as Grafana would put it in a query: its current value, ``All`` as a regex
    matching everything."""
    values = dict(INTERVALS)
    for variable in dashboard.get("templating", {}).get("list", []):
        current = (variable.get("current") or {}).get("value", "")
        if isinstance(current, list):
            current = current[0] if current else ""
        if current in ("$__all", "", None):
            current = variable.get("allValue") or ".*"
        values[variable["name"]] = str(current)
    return values


def _substitute(expression: str, values: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        assert name in values, f"{expression!r} uses ${name}, which the dashboard does not define"
        return values[name]

    return re.sub(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)", value, expression)  # not $1 of label_replace


def _label_values_query(query: str) -> str | None:
    """The series selector of a Grafana ``label_values(selector, label)`` query (None: another kind of query)."""
    found = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", query, flags=re.DOTALL)
    return found.group(1) if found else None


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def dashboard_expressions(path: Path) -> list[str]:
    """Every PromQL expression of a dashboard: its panels' targets and its query variables, variables replaced."""
    dashboard = json.loads(path.read_text())
    values = _variable_values(dashboard)
    expressions = []
    for node in _walk(dashboard.get("panels", [])):
        if isinstance(node.get("expr"), str) and node["expr"].strip():
            expressions.append(node["expr"])
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        query = query.get("query") if isinstance(query, dict) else query
        selector = _label_values_query(str(query))
        assert selector is not None, f"{path.name}: variable {variable['name']} is no label_values query: {query!r}"
        expressions.append(selector)
    # a trailing comment (Karpenter's "# Selects a single resource type ...") is PromQL too
    return [_substitute(expression, values) for expression in expressions]


def rule_expressions(path: Path) -> list[str]:
    rule = yaml.safe_load(path.read_text())
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["kind"] == "PrometheusRule"
    return [r["expr"] for group in rule["spec"]["groups"] for r in group["rules"]]


def selectors(expression: str) -> list[tuple[str, set[str]]]:
    """Each series selector of ``expression``: the metric's name and the labels it matches on."""
    found: list[tuple[str, set[str]]] = []

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            labels = {m.name for m in node.matchers.matchers}
            name = node.name or next(m.value for m in node.matchers.matchers if m.name == "__name__")
            found.append((name, labels - {"__name__"}))

    promql_parser.walk(promql_parser.parse(expression), visit)
    return found


def metric_names(expressions: list[str]) -> set[str]:
    return {name for expression in expressions for name, _ in selectors(expression)}


# ------------------------------------------------------------------------------------------ what ebb serves


def _sample_names(family: Metric) -> set[str]:
    """The sample names a family serves (by its type: a family with no series yet still names its samples)."""
    base = family.name
    by_type = {"counter": {f"{base}_total"}, "histogram": {f"{base}_bucket", f"{base}_count", f"{base}_sum"},
               "summary": {base, f"{base}_count", f"{base}_sum"}}
    return by_type.get(family.type, {base}) | {sample.name for sample in family.samples}


@pytest.fixture(scope="module")
def run() -> Iterator[EmbeddedRun]:
    with embedded_run(duration="6h") as running:
        yield running


def _decided_and_terminated(families: dict[str, Metric]) -> bool:
    """The run has approved decisions, terminated nodes recently (the summary's quantiles are numbers) and finished a
    command (its nodes are terminated a moment before it ends; the executor runs several at once), and the API has
    answered a request (its own metric has a series)."""
    return (has_samples(families, "ebb_voluntary_disruption_decisions") and has_samples(families, "ebb_api_requests")
            and has_samples(families, "ebb_nodes_termination_duration_seconds", real=True)
            and has_samples(families, "ebb_disruption_commands"))


@pytest.fixture(scope="module")
def embedded(run: EmbeddedRun) -> dict[str, Metric]:
    """The families the embedded run's /metrics serves once it has decided and terminated."""
    return run.scrape_until(_decided_and_terminated)


@pytest.fixture(scope="module")
def served(embedded: dict[str, Metric]) -> dict[str, set[str]]:
    """Every metric ebb serves: sample name -> the labels its series have (empty when none was seen)."""
    registry = CollectorRegistry()
    WatcherMetrics(["Node", "Pod"], registry=registry).kinds_failing({"Pod": "forbidden"})
    IngesterMetrics(registry=registry)
    Readiness(registry=registry).condition("snapshot")
    families = {**families_of(generate_latest(registry).decode()), **embedded}
    names: dict[str, set[str]] = {}
    for family in families.values():
        for name in _sample_names(family):
            names.setdefault(name, set())
        for sample in family.samples:
            names[sample.name] |= set(sample.labels)
    return names


# ------------------------------------------------------------------------------------------ the tests


@pytest.mark.parametrize("path", [EBB_DASHBOARD, *KARPENTER_DASHBOARDS], ids=lambda p: p.name)
def test_every_dashboard_expression_parses(path: Path) -> None:
    expressions = dashboard_expressions(path)
    assert expressions
    for expression in expressions:
        assert selectors(expression), f"{path.name}: {expression!r} reads no metric"


def test_every_rule_parses_and_alerts_on_what_the_issue_asks() -> None:
    rule = yaml.safe_load(RULES.read_text())
    alerts = {r["alert"] for group in rule["spec"]["groups"] for r in group["rules"]}
    assert {"EbbDecisionStuck", "EbbBudgetExhausted", "EbbConsumerLag", "EbbPlannerWithoutLeader"} <= alerts
    for expression in rule_expressions(RULES):
        assert selectors(expression)


def _unknown(expressions: list[str], served: dict[str, set[str]]) -> list[str]:
    """What the expressions name that ebb does not serve: metrics, and labels matched on that their series lack."""
    problems = []
    for expression in expressions:
        for name, labels in selectors(expression):
            if name not in served:
                problems.append(f"{name} in {expression!r}")
                continue
            seen = served[name]
            extra = {"le"} if name.endswith("_bucket") else {"quantile"}
            if seen and not labels <= seen | extra:
                problems.append(f"{name} has no label {sorted(labels - seen - extra)} in {expression!r}")
    return problems


def test_ebbs_dashboard_and_rules_name_only_what_ebb_serves(served: dict[str, set[str]]) -> None:
    expressions = dashboard_expressions(EBB_DASHBOARD) + rule_expressions(RULES)
    assert _unknown(expressions, served) == []


def test_karpenters_dashboards_with_the_prefix_swapped_read_what_ebb_serves(served: dict[str, set[str]]) -> None:
    expressions = [e for path in KARPENTER_DASHBOARDS for e in dashboard_expressions(path)]
    names = metric_names(expressions)
    assert not any(name.startswith("karpenter_") for name in names), "a karpenter_ prefix is left"
    ebbs = {name for name in names if name.startswith("ebb_")}
    assert {name for name in ebbs if name not in served} == set(KARPENTER_NOT_SERVED)
    assert all(name.startswith(OTHER_EXPORTERS) for name in names - ebbs), sorted(names - ebbs)
    readable = [e for e in expressions if metric_names([e]) <= set(served)]
    assert _unknown(readable, served) == []
    # the coverage docs/metrics.md states: Karpenter's 13 metrics in its two dashboards, all served
    assert (len(ebbs), len(ebbs - set(KARPENTER_NOT_SERVED))) == (13, 13)


def test_the_embedded_metrics_have_every_services_metrics(embedded: dict[str, Metric]) -> None:
    """One registry: the planner's, the executor's and the decisions-api's metrics on the API's /metrics, with the
    process's build and each consumer group's lag once."""
    for planner in ("ebb_voluntary_disruption_decisions", "ebb_voluntary_disruption_eligible_nodes",
                    "ebb_nodepools_allowed_disruptions", "ebb_cluster_state_synced", "ebb_planner_leader",
                    "ebb_nodes_allocatable", "ebb_pods_state", "ebb_nodepools_usage"):
        assert has_samples(embedded, planner), planner
    for executor in ("ebb_disruption_commands", "ebb_pods_eviction_requests", "ebb_nodes_terminated",
                     "ebb_nodeclaims_termination_duration_seconds", "ebb_disruption_commands_executing"):
        assert has_samples(embedded, executor), executor
    for api in ("ebb_api_requests", "ebb_api_snapshot_objects", "ebb_api_consumed_messages"):
        assert has_samples(embedded, api), api
    [build] = embedded["ebb_build_info"].samples
    assert build.labels["version"] == ebb.__version__ and build.value == 1
    assert {s.labels["topic"] for s in embedded["ebb_consumer_lag"].samples} >= {
        "ebb.cluster.objects", "ebb.disruption.commands", "ebb.disruption.events"}
    assert embedded["ebb_cluster_state_synced"].samples[0].value == 1
    assert embedded["ebb_planner_leader"].samples[0].value == 1
    summary = embedded["ebb_nodes_termination_duration_seconds"]
    assert summary.type == "summary"
    quantiles = {s.labels["quantile"] for s in summary.samples if "quantile" in s.labels}
    assert quantiles == {"0", "0.5", "0.9", "0.99", "1"}
    # pods evicted by the decisions come back Pending and start on other nodes
    assert next(s.value for s in embedded["ebb_pods_startup_duration_seconds"].samples
                if s.name == "ebb_pods_startup_duration_seconds_count") > 0


# ------------------------------------------------------------------------------------------ a real Prometheus

def test_a_real_prometheus_answers_every_panel_and_rule(run: EmbeddedRun, embedded: dict[str, Metric],
                                                        tmp_path: Path) -> None:
    """Prometheus scrapes the run every second; then each panel's query that reads only metrics the run has series
    of answers with series (a value may be NaN: a summary's quantile or a rate's ratio with nothing observed in the
    window, which Grafana shows as no value at that moment), and each rule's expression evaluates."""
    with prometheus_scraping(run, tmp_path) as base:
        with_series = {s.name for family in embedded.values() for s in family.samples}
        silent: list[str] = []
        answered: list[str] = []
        for path in (EBB_DASHBOARD, *KARPENTER_DASHBOARDS, RULES):
            expressions = rule_expressions(path) if path == RULES else dashboard_expressions(path)
            for expression in expressions:
                names = metric_names([expression])
                if not names <= with_series:
                    continue  # reads a metric the embedded run has no series of (distributed only, or not ebb's)
                if path == RULES:
                    query(base, expression)  # evaluates (an alert's condition is false in a healthy run: no series)
                    continue
                (answered if query(base, expression) else silent).append(f"{path.name}: {expression}")
        assert silent == []
        # every panel of ebb's dashboard whose metrics the embedded mode has, and Karpenter's that ebb serves
        print(f"{len(answered)} panel queries answered", *answered, sep="\n")
        assert len(answered) >= 30
