"""The single-file HTML report of a backtest (``ebb backtest --report out.html``), and the page and back-test sections
the shadow report's (``ebb_cli.shadow_report``) shares with it.

Owns the presentation of a backtest result: it validates the result (a pydantic model, so a malformed
result fails with a clear error instead of a broken page), says first what the run found (``verdict``: each
policy's cost and churn against the baseline, the first policy, in one line each, with evictions; or a banner
when only the baseline ran, so a report that compares nothing says so), draws the time series per policy with
plotly (its JavaScript inlined once, so the file works offline; every axis with its unit), puts the summaries
side by side with the best value per row marked, lists per policy the decisions that saved the most with the
planner's explanations (what each saves against the evictions it costs), and shows each policy's source.
Everything from the input is HTML-escaped.
"""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from pydantic import AwareDatetime, BaseModel, ConfigDict


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class SeriesPoint(_Open):
    t: AwareDatetime
    cost_per_hour: float
    nodes: int
    pending_pods: int
    disruptions: int
    launches: int


class PolicySummary(_Open):
    node_hours_cost: float
    peak_nodes: int
    mean_nodes: float
    launches: int
    disruptions: dict[str, int]
    evictions: int
    pods_evicted_more_than_once: int
    pending_seconds_p50: float
    pending_seconds_p95: float
    churn_cost: float
    #: nodes a trace interrupted, and pods still on a node when it was taken away (0 in results made before them)
    interruptions: int = 0
    pods_lost: int = 0


class TopDecision(_Open):
    at: AwareDatetime
    method: str
    action: str
    nodes: list[str]
    savings_per_hour: float
    explanation: str


class PolicyResult(_Open):
    name: str
    source: str
    summary: PolicySummary
    series: list[SeriesPoint]
    #: the trace's events the cluster could not apply
    trace_errors: list[str] = []
    #: the disrupting decisions that saved the most, with the planner's explanations (none in older results)
    decisions: list[TopDecision] = []


class BacktestResult(_Open):
    trace: str
    start: AwareDatetime
    duration_seconds: float
    seed: int
    policies: list[PolicyResult]


# (label, series field) — one chart each, every policy a line in it.
CHARTS: tuple[tuple[str, str], ...] = (
    ("Cost per hour ($)", "cost_per_hour"),
    ("Nodes", "nodes"),
    ("Pending pods", "pending_pods"),
    ("Disruptions", "disruptions"),
    ("Launches", "launches"),
)
#: series field → its y axis' title (the unit); the x axis is the simulated time
UNITS: dict[str, str] = {
    "cost_per_hour": "$ per hour",
    "nodes": "nodes",
    "pending_pods": "pods",
    "disruptions": "nodes disrupted per sample",
    "launches": "nodes launched per sample",
}
X_AXIS = "simulated time (UTC)"
#: the built-in baseline: ebb's simulation of Karpenter at its defaults, named so wherever it is quoted
KARPENTER_DEFAULT = "karpenter-default"

# (label, summary field); every row here is "lower is better".
SUMMARY_ROWS: tuple[tuple[str, str], ...] = (
    ("Node-hours cost ($)", "node_hours_cost"),
    ("Peak nodes", "peak_nodes"),
    ("Mean nodes", "mean_nodes"),
    ("Launches", "launches"),
    ("Evictions", "evictions"),
    ("Pods evicted more than once", "pods_evicted_more_than_once"),
    ("Pending seconds p50", "pending_seconds_p50"),
    ("Pending seconds p95", "pending_seconds_p95"),
    ("Churn cost", "churn_cost"),
)


def _chart_html(result: BacktestResult, label: str, field: str, *, first: bool) -> str:
    figure = go.Figure()
    for policy in result.policies:
        figure.add_trace(
            go.Scatter(
                x=[point.t for point in policy.series],
                y=[getattr(point, field) for point in policy.series],
                mode="lines",
                name=policy.name,
                line_shape="hv",
            )
        )
    figure.update_layout(title_text=label, height=320, margin={"l": 70, "r": 20, "t": 40, "b": 50},
                         xaxis_title_text=X_AXIS, yaxis_title_text=UNITS[field])
    return figure_html(figure, first=first)


def _summary_table(result: BacktestResult) -> str:
    names = "".join(f"<th>{html.escape(policy.name)}</th>" for policy in result.policies)
    rows = [f"<tr><th>Metric</th>{names}</tr>"]
    table_rows = [
        (label, [float(getattr(policy.summary, field)) for policy in result.policies])
        for label, field in SUMMARY_ROWS
    ]
    disruptions = [float(sum(policy.summary.disruptions.values())) for policy in result.policies]
    table_rows += [
        ("Disruptions", disruptions),
        ("Launches + disruptions", [policy.summary.launches + total
                                    for policy, total in zip(result.policies, disruptions, strict=True)]),
    ]
    if any(policy.summary.interruptions for policy in result.policies):  # a trace interrupted nodes
        table_rows += [(label, [float(getattr(policy.summary, field)) for policy in result.policies])
                       for label, field in (("Interruptions", "interruptions"), ("Pods lost", "pods_lost"))]
    methods = sorted({method for policy in result.policies for method in policy.summary.disruptions})
    table_rows += [
        (f"Disruptions: {method}", [float(policy.summary.disruptions.get(method, 0)) for policy in result.policies])
        for method in methods
    ]
    for label, values in table_rows:
        best = min(values)
        marked = len(values) > 1 and len(set(values)) > 1
        cells = "".join(
            f'<td class="best">{value:g} ★</td>' if marked and value == best else f"<td>{value:g}</td>"
            for value in values
        )
        rows.append(f"<tr><th>{html.escape(label)}</th>{cells}</tr>")
    base = result.policies[0].summary
    if len(result.policies) > 1:  # the headline rows the terminal shows too: each policy against the baseline
        for label, of in (("Churn against the baseline", lambda p: (churn(p), churn(base))),
                          ("Cost against the baseline", lambda p: (p.node_hours_cost, base.node_hours_cost))):
            cells = "".join("<td>(baseline)</td>" if index == 0 else f"<td>{_change(*of(policy.summary))}</td>"
                            for index, policy in enumerate(result.policies))
            rows.insert(1, f'<tr class="against"><th>{label}</th>{cells}</tr>')
    return '<table class="summary">' + "".join(rows) + "</table>"


def churn(summary: PolicySummary) -> int:
    """Launches + disruption decisions: how much the nodes changed under the policy."""
    return summary.launches + sum(summary.disruptions.values())


def _change(value: float, base: float) -> str:
    if base == 0:
        return "±0%" if value == 0 else "from none"
    percent = 100.0 * (value - base) / base
    return f"{percent:+.1f}%" if round(percent, 1) != 0 else "±0%"


def baseline_name(name: str) -> str:
    """The baseline as the report names it: the built-in one is ebb's simulation of Karpenter, not Karpenter."""
    return f"{name} (ebb's simulation of Karpenter's defaults)" if name == KARPENTER_DEFAULT else name


def verdict(result: BacktestResult) -> list[str]:
    """What the run found, one line per policy after the first (the baseline): its cost and churn against the
    baseline's and its evictions; with only the baseline, one line saying the report compares nothing."""
    base, *others = result.policies
    if not others:
        return [f"Only the baseline, {baseline_name(base.name)}, ran: this report compares nothing. Add a policy "
                "(ebb backtest --policy FILE) to see what it changes."]
    lines = []
    for policy in others:
        cost = _change(policy.summary.node_hours_cost, base.summary.node_hours_cost)
        moved = _change(churn(policy.summary), churn(base.summary))
        cheaper = policy.summary.node_hours_cost <= base.summary.node_hours_cost
        calmer = churn(policy.summary) <= churn(base.summary)
        word = ("better on both" if cheaper and calmer else "cheaper, with more churn" if cheaper
                else "less churn, at a higher cost" if calmer else "worse on both")
        lines.append(
            f"{policy.name}: {word}: cost {cost} (${policy.summary.node_hours_cost:,.2f} against "
            f"${base.summary.node_hours_cost:,.2f}), churn {moved} ({churn(policy.summary)} launches + disruptions "
            f"against {churn(base.summary)}), evictions {policy.summary.evictions} against "
            f"{base.summary.evictions}, against {baseline_name(base.name)}.")
    return lines


def _decisions_html(result: BacktestResult) -> str:
    """Per policy, the decisions that saved the most, each with what it did, when, and the planner's explanation
    (what it saves against the evictions it costs): why the policy's figures are what they are."""
    parts = []
    for policy in result.policies:
        if not policy.decisions:
            parts.append(f"<h3>{html.escape(policy.name)}</h3><p>No node was disrupted.</p>")
            continue
        rows = "".join(
            f"<tr><td>{html.escape(d.at.strftime('%Y-%m-%d %H:%M:%S'))}</td><td>{html.escape(d.method)}</td>"
            f"<td>{html.escape(d.action)}</td><td>{html.escape(', '.join(d.nodes))}</td>"
            f"<td>${d.savings_per_hour:,.4f}/h</td><td class=\"why\">{html.escape(d.explanation)}</td></tr>"
            for d in policy.decisions)
        parts.append(f"<h3>{html.escape(policy.name)}</h3><table class=\"decisions\"><tr><th>At</th><th>Method</th>"
                     f"<th>Action</th><th>Nodes</th><th>Saves</th><th>Why</th></tr>{rows}</table>")
    return "".join(parts)


def _verdict_html(result: BacktestResult) -> str:
    lines = verdict(result)
    kind = "banner" if len(result.policies) == 1 else "verdict"
    return f'<div class="{kind}">' + "".join(f"<p>{html.escape(line)}</p>" for line in lines) + "</div>"


#: the reports' style sheet (this one and the shadow report's, ``ebb_cli.shadow_report``)
STYLE = (
    "body{font-family:sans-serif;margin:2em}table.summary{border-collapse:collapse}"
    "table.summary td,table.summary th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
    "td.best{background:#d8f5d8;font-weight:bold}pre{background:#f4f4f4;padding:1em}"
    "div.verdict{border-left:6px solid #2a7;padding:.2em 1em;background:#eefaf2}"
    "div.banner{border-left:6px solid #c80;padding:.2em 1em;background:#fff5e0}"
    "table.decisions{border-collapse:collapse}table.decisions td,table.decisions th{border:1px solid #ccc;"
    "padding:4px 8px;text-align:left;vertical-align:top}td.why{max-width:60em}"
)


def page(title: str, body: str) -> str:
    """A self-contained HTML document: ``title`` (plain text, escaped here) over ``body`` (HTML)."""
    escaped = html.escape(title)
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{escaped}</title><style>{STYLE}</style>"
            f"</head><body><h1>{escaped}</h1>{body}</body></html>\n")


def figure_html(figure: go.Figure, *, first: bool) -> str:
    """One plotly chart as a ``<div>``; ``first``: with plotly's JavaScript inlined (once a page, so it works
    offline)."""
    chart: str = pio.to_html(figure, full_html=False, include_plotlyjs=first, config={"displaylogo": False})
    return chart


def backtest_sections(result: dict[str, Any], *, first: bool = True, level: int = 2) -> str:
    """What a back-test found, its summary table and its charts over time, as HTML sections (each a heading of
    ``level`` and what follows); ``first``: the page has no chart before these (the first carries plotly's
    JavaScript). Raises pydantic.ValidationError on a malformed result."""
    parsed = BacktestResult.model_validate(result)
    charts = "".join(
        f'<div class="chart">{_chart_html(parsed, label, field, first=first and index == 0)}</div>'
        for index, (label, field) in enumerate(CHARTS)
    )
    h = f"h{level}"
    return (f"<{h}>What it found</{h}>{_verdict_html(parsed)}"
            f"<{h}>Summary (★ = best, lower is better)</{h}>{_summary_table(parsed)}"
            f"<{h}>Over time</{h}>{charts}")


def render_report(result: dict[str, Any]) -> str:
    """The report as one self-contained HTML document; raises pydantic.ValidationError on a malformed result."""
    parsed = BacktestResult.model_validate(result)
    sources = "".join(
        f"<h3>{html.escape(policy.name)}</h3><pre>{html.escape(policy.source)}</pre>" for policy in parsed.policies
    )
    skipped = "".join(
        f"<h3>{html.escape(policy.name)}: {len(policy.trace_errors)} trace event(s) not applied</h3><ul>"
        + "".join(f"<li>{html.escape(error)}</li>" for error in policy.trace_errors) + "</ul>"
        for policy in parsed.policies if policy.trace_errors
    )
    return page(
        f"ebb backtest: {parsed.trace}",
        f"<p>start {html.escape(parsed.start.isoformat())}, {parsed.duration_seconds:g} s, seed {parsed.seed}</p>"
        + backtest_sections(result)
        + f"<h2>The decisions that saved the most, and why</h2>{_decisions_html(parsed)}"
        f"<h2>Policies</h2>{sources}"
        + (f"<h2>Trace events not applied</h2>{skipped}" if skipped else ""),
    )
