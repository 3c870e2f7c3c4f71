"""The shadow report as people read it (``ebb shadow report``; docs/shadow.md): what it found in sentences, the words
and tables the terminal shows, and the single-file HTML page (``--report FILE.html``).

Its input is the decisions-api's document (``ebb.core.shadow.as_json``, ``GET /v1/shadow/report``), with, under
``backtest``, the figures of the recorded period's back-test when there was one. The terminal and the page say the
same sentences (`summary`) and list the same rows; the page adds what a table does not show at a glance: a bar per
reason for which ebb would have left Karpenter's removals alone, a timeline of the period (every removal and every
approval of ebb's at its time, per NodePool), and, given the back-test's whole result, its verdict, summary and
charts as ``ebb backtest --report`` draws them (``ebb_cli.report``'s sections). plotly's JavaScript is inlined once,
so the file works offline; everything from the API is HTML-escaped. plotly is imported only when a page is made:
the words need none of it (``ebb-cli`` without the ``embedded`` extra prints them).
"""

from __future__ import annotations

import html
from typing import Any

#: the page's sections, by their element id: (heading, what the list is)
SECTIONS: dict[str, tuple[str, str]] = {
    "karpenter-only": ("Karpenter removed, ebb would not have",
                       "Nodes Karpenter removed that no shadow decision of ebb's held then, with ebb's reason at its "
                       "last pass before Karpenter's taint: the disruptions your policies would have prevented."),
    "ebb-only": ("ebb would have disrupted, Karpenter kept",
                 "Decisions ebb approved whose nodes Karpenter did not remove in the period, with the saving per hour "
                 "and what it comes to from the approval to the end of the period (or until the node went anyway)."),
    "both": ("Both",
             "Nodes Karpenter removed that ebb had decided to disrupt too, and how far ahead of Karpenter ebb was."),
    "timeline": ("Over the period", "Every removal of Karpenter's and every approval of ebb's, at its time."),
    "backtest": ("Back-test of the recorded period",
                 "The recording of the period replayed under ebb's simulation of Karpenter's defaults (the first row) "
                 "and under ebb's policy: read the first row against Karpenter's removals above before trusting the "
                 "second."),
}
#: the timeline's markers: (list of the report, legend, symbol)
TIMELINE: tuple[tuple[str, str, str], ...] = (
    ("karpenterOnly", "Karpenter removed; ebb would not have", "x"),
    ("both", "Karpenter removed; ebb had decided too", "diamond"),
    ("ebbOnly", "ebb approved; Karpenter kept the node", "circle"),
)


def when(value: Any) -> str:
    """An RFC 3339 time of the API's to the second, as the tables show it (``2026-11-23 18:30:00Z``)."""
    text = str(value or "")
    return text[:19].replace("T", " ") + "Z" if len(text) >= 19 else text


def money(value: Any) -> str:
    return f"{float(value or 0):.4f}"


def summary(answer: dict[str, Any]) -> list[str]:
    """What the report found, in sentences: Karpenter's removals, ebb's decisions Karpenter kept with their saving,
    the shadow decisions by state, and why ebb would have left Karpenter's removals alone (when it would have)."""
    c = answer["counts"]
    lines = [f"Karpenter removed {c['karpenterRemovals']} node(s): ebb would have disrupted {c['both']} of them "
             f"too, {c['karpenterOnly']} not.",
             f"ebb would have disrupted {c['ebbOnly']} decision(s)' nodes Karpenter kept, saving "
             f"{money(c['ebbOnlySavingsPerHour'])}/h, {money(c['ebbOnlySaved'])} over the period.",
             f"ebb's shadow decisions: {c['shadowDecisions']} ({c['approved']} approved, {c['proposed']} still "
             f"proposed, {c['rejected']} rejected at validation); other removals (not Karpenter's): "
             f"{c['otherRemovals']}."]
    by_category = c.get("karpenterOnlyByCategory") or {}
    if by_category:
        lines.append("why ebb would have left Karpenter's removals alone: "
                     + ", ".join(f"{k} {v}" for k, v in by_category.items()))
    return lines


# -- the rows, shared by the terminal and the page ----------------------------------------------------------------

KARPENTER_ONLY = ["NODE", "NODEPOOL", "REMOVED AT", "KARPENTER'S REASON", "EBB", "EBB'S REASON"]
EBB_ONLY = ["DECISION", "NODES", "METHOD", "REASON", "APPROVED AT", "SAVING/H", "SAVED"]
BOTH = ["NODE", "KARPENTER AT", "KARPENTER'S REASON", "EBB'S DECISION", "EBB AHEAD"]
BACKTEST = ["POLICY", "COST", "CHURN", "EVICTIONS", "PENDING POD-SECONDS", "PENDING AT END"]


def karpenter_only_rows(answer: dict[str, Any]) -> list[list[str]]:
    return [[e["node"], e["nodePool"], when(e["removedAt"]), e["reason"], e["ebb"]["category"],
             e["ebb"]["reason"] or "no pass of ebb's saw the node"] for e in answer["karpenterOnly"]]


def ebb_only_rows(answer: dict[str, Any]) -> list[list[str]]:
    return [[e["id"], ",".join(e["kept"]) + (" (partly)" if e["partial"] else ""), e["method"], e["reason"],
             when(e["approvedAt"]), money(e["savingsPerHour"]), money(e["saved"])] for e in answer["ebbOnly"]]


def both_rows(answer: dict[str, Any]) -> list[list[str]]:
    return [[b["node"], when(b["removedAt"]), b["reason"], f"{b['decision']['id']} ({b['decision']['state']})",
             f"{b['ebbAheadSeconds']:.0f}s"] for b in answer["both"]]


def backtest_rows(tested: dict[str, Any]) -> list[list[str]]:
    return [[p["name"], money(p["cost"]), str(p["churn"]), str(p["evictions"]), f"{p['pendingPodSeconds']:.0f}",
             str(p["pendingPodsAtEnd"])] for p in tested["policies"]]


def backtest_heading(tested: dict[str, Any]) -> str:
    hours = tested["durationSeconds"] / 3600
    return (f"{tested['trace']}, {hours:.1f} h from {when(tested['start'])}, seed {tested['seed']}; the first row is "
            "ebb's simulation of Karpenter's defaults")


# -- the terminal -------------------------------------------------------------------------------------------------


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell, two spaces apart (kubectl's look)."""
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]
    return ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in [header, *rows]]


def render(answer: dict[str, Any]) -> list[str]:
    """The report in words and tables, for the terminal."""
    lines = [f"Shadow report from {when(answer['since'])} to {when(answer['until'])}",
             *(f"  {line}" for line in summary(answer))]
    if answer["karpenterOnly"]:
        lines += ["", "Karpenter only (removed by Karpenter; ebb's reason then):"]
        lines += _table(KARPENTER_ONLY, karpenter_only_rows(answer))
    if answer["ebbOnly"]:
        lines += ["", "ebb only (approved by ebb; Karpenter kept the nodes):"]
        lines += _table(EBB_ONLY, ebb_only_rows(answer))
    if answer["both"]:
        lines += ["", "Both (Karpenter removed a node ebb had decided to disrupt):"]
        lines += _table(BOTH, both_rows(answer))
    tested = answer.get("backtest")
    if tested:
        lines += ["", f"Back-test of the recorded period ({backtest_heading(tested)}):"]
        lines += _table(BACKTEST, backtest_rows(tested))
    return lines


# -- the page -----------------------------------------------------------------------------------------------------


def _heading(column: str) -> str:
    """A terminal column's heading as the page writes it (``KARPENTER'S REASON``: ``Karpenter's reason``)."""
    words = column.lower().replace("karpenter", "Karpenter").replace("nodepool", "NodePool")
    return words if words.startswith("ebb") else words[:1].upper() + words[1:]


def _html_table(header: list[str], rows: list[list[str]], *, why: int | None = None) -> str:
    """A table of the rows (escaped); column ``why`` (a sentence) is drawn wide."""
    head = "".join(f"<th>{html.escape(_heading(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(
        f'<td class="why">{html.escape(cell)}</td>' if index == why else f"<td>{html.escape(cell)}</td>"
        for index, cell in enumerate(row)) + "</tr>" for row in rows)
    return f'<table class="decisions"><tr>{head}</tr>{body}</table>'


def _section(name: str, content: str) -> str:
    heading, about = SECTIONS[name]
    return f'<section id="{name}"><h2>{html.escape(heading)}</h2><p>{html.escape(about)}</p>{content}</section>'


def _categories_chart(answer: dict[str, Any], *, first: bool) -> str:
    """A bar per reason for which ebb would have left Karpenter's removals alone (the report's categories)."""
    import plotly.graph_objects as go

    from ebb_cli.report import figure_html

    by_category = answer["counts"].get("karpenterOnlyByCategory") or {}
    figure = go.Figure(go.Bar(x=list(by_category), y=list(by_category.values()), name="removals"))
    figure.update_layout(title_text="Karpenter's removals ebb would have left alone, by ebb's reason", height=320,
                         margin={"l": 70, "r": 20, "t": 40, "b": 50}, xaxis_title_text="ebb's reason (category)",
                         yaxis_title_text="nodes removed by Karpenter", yaxis_dtick=1)
    return f'<div class="chart">{figure_html(figure, first=first)}</div>'


def _timeline_chart(answer: dict[str, Any], *, first: bool) -> str:
    """Every removal of Karpenter's and every approval of ebb's at its time, a row per NodePool."""
    import plotly.graph_objects as go

    from ebb_cli.report import figure_html

    figure = go.Figure()
    for key, legend, symbol in TIMELINE:
        entries = answer[key]
        if not entries:
            continue
        if key == "ebbOnly":
            x = [e["approvedAt"] for e in entries]
            y = [", ".join(e["nodePools"]) for e in entries]
            text = [f"{e['id']}: {', '.join(e['kept'])}, {e['method']} ({e['reason']}), saving "
                    f"{money(e['savingsPerHour'])}/h" for e in entries]
        else:
            x = [e["removedAt"] for e in entries]
            y = [e["nodePool"] for e in entries]
            text = [f"{e['node']}: {e['reason']}; ebb: {e['ebb']['category']}" if key == "karpenterOnly"
                    else f"{e['node']}: {e['reason']}; ebb's {e['decision']['id']}" for e in entries]
        figure.add_trace(go.Scatter(x=x, y=y, mode="markers", name=legend, text=text, hoverinfo="text+x",
                                    marker={"symbol": symbol, "size": 11}))
    figure.update_layout(title_text="Karpenter's removals and ebb's approvals", height=320,
                         margin={"l": 70, "r": 20, "t": 40, "b": 50}, xaxis_title_text="time (UTC)",
                         yaxis_title_text="NodePool")
    return f'<div class="chart">{figure_html(figure, first=first)}</div>'


def render_page(answer: dict[str, Any], backtest_result: dict[str, Any] | None = None) -> str:
    """The report as one self-contained HTML document. ``backtest_result``: the back-test's whole result
    (``ebb_embedded.backtest.run_backtest``'s), drawn under the figures ``answer['backtest']`` holds."""
    from ebb_cli.report import backtest_sections, page

    charted = False

    def chart(draw: Any) -> str:
        nonlocal charted
        drawn: str = draw(answer, first=not charted)
        charted = True
        return drawn

    found = ('<div class="verdict" id="found">' + "".join(f"<p>{html.escape(line)}</p>" for line in summary(answer))
             + "</div>")
    alone = (chart(_categories_chart) + _html_table(KARPENTER_ONLY, karpenter_only_rows(answer), why=5)
             if answer["karpenterOnly"] else "<p>None.</p>")
    c = answer["counts"]
    ours = (_html_table(EBB_ONLY, ebb_only_rows(answer))
            + f'<p class="total">In all: saving {money(c["ebbOnlySavingsPerHour"])}/h, '
              f'{money(c["ebbOnlySaved"])} over the period.</p>'
            if answer["ebbOnly"] else "<p>None.</p>")
    both = _html_table(BOTH, both_rows(answer)) if answer["both"] else "<p>None.</p>"
    timeline = (chart(_timeline_chart) if any(answer[key] for key, _, _ in TIMELINE)
                else "<p>Nothing happened in the period.</p>")
    body = (f"<h2>What it found</h2>{found}" + _section("karpenter-only", alone) + _section("ebb-only", ours)
            + _section("both", both) + _section("timeline", timeline))
    tested = answer.get("backtest")
    if tested:
        drawn = backtest_sections(backtest_result, first=not charted, level=3) if backtest_result else ""
        body += _section("backtest", f"<p>{html.escape(backtest_heading(tested))}.</p>"
                                     + _html_table(BACKTEST, backtest_rows(tested)) + drawn)
    return page(f"ebb shadow report: {when(answer['since'])} to {when(answer['until'])}", body)
