"""`ebb shadow report`: shadow mode's report (docs/shadow.md), asked of the running system's decisions-api
(``GET /v1/shadow/report``) like ``ebb explain --api``: over the period, what Karpenter removed that ebb would have
left alone (with ebb's reason at the time), what ebb would have disrupted that Karpenter kept (with the saving),
what both did, and the counts. The comparison is ``ebb.core.shadow``'s, made by the API; this module only asks and
prints (``-o json``: the API's document as it is; the words and the HTML page, ``--report FILE.html``, are
``ebb_cli.shadow_report``'s).

With ``--trace``, a recording of the period (``ebb record --from-kafka`` beside the shadow run), the report adds the
back-test of the recorded period (``ebb_embedded.backtest``, as ``ebb backtest --trace`` runs it): Karpenter's
defaults as ebb simulates them against ebb's policy (``--policy``, or the DisruptionPolicies and Holds the recording
holds), each policy's cost, churn, evictions and pending pods (``-o json``: under ``backtest``; the page draws its
charts as ``ebb backtest --report`` does).

Exit codes: 0 with a report, 2 for bad input (a period that is none, no ``--api``, a token the API refuses, a
``--report`` file that cannot be written), 1 for an API that does not answer or a page that could not be written
after all.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from ebb_cli.common import (
    FlagCommand,
    FlagGroup,
    Output,
    get_api_json,
    load_trace,
    require_extra,
    unwritable,
    write_whole,
)
from ebb_cli.shadow_report import render, render_page

shadow_app = typer.Typer(help="Shadow mode: what ebb would have done beside the Karpenter that disrupts.",
                         no_args_is_help=True, cls=FlagGroup)


@shadow_app.command(name="report", cls=FlagCommand)
def report(  # noqa: PLR0917 - one parameter per command-line option, as typer wants
    since: Annotated[str, typer.Option(help="the period before --until: 7d, 12h, 90m, 30s, 1w")] = "7d",
    until: Annotated[str | None, typer.Option(help="the end of the period, RFC 3339 (default: now)")] = None,
    api: Annotated[str, typer.Option(envvar="EBB_API_URL", show_envvar=True,
                                     help="the decisions-api at this URL (http://HOST:PORT)")] = "",
    token: Annotated[str, typer.Option(envvar="EBB_API_TOKEN", show_envvar=True,
                                       help="the API's bearer token")] = "",
    output: Annotated[Output, typer.Option("-o", "--output", help="table (words; default) or json")] = Output.table,
    trace: Annotated[Path | None, typer.Option(
        help="a recording of the period (ebb record): add its back-test, Karpenter's defaults against ebb's policy",
        show_default=False)] = None,
    policy: Annotated[Path | None, typer.Option(
        help="with --trace: ebb's policy, a file of DisruptionPolicy and Hold documents (default: those the "
             "recording holds)", show_default=False)] = None,
    seed: Annotated[int, typer.Option(help="with --trace: the back-test's seed")] = 0,
    report_file: Annotated[Path | None, typer.Option(
        "--report", help="also write the report as one HTML file (charts included; it works offline)",
        show_default=False)] = None,
) -> None:
    """What ebb in shadow mode would have disrupted, beside what Karpenter did, over a period."""
    from ebb.core.shadow import parse_period

    try:
        parse_period(since)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--since") from exc
    if not api:
        typer.echo("error: ebb shadow report asks the decisions-api: give --api URL (or EBB_API_URL)", err=True)
        raise typer.Exit(2)
    if policy is not None and trace is None:
        raise typer.BadParameter("only with --trace", param_hint="--policy")
    if report_file is not None:
        require_extra("embedded", "ebb shadow report --report", "plotly")
        problem = unwritable(report_file)
        if problem:
            raise typer.BadParameter(f"{report_file}: {problem}", param_hint="--report")
    query = {"since": since, **({"until": until} if until else {})}
    answer = _get(api, token, "/v1/shadow/report", query)
    result = None
    if trace is not None:
        answer["backtest"], result = backtest(trace, policy, seed)
    if output is Output.json:
        import json

        typer.echo(json.dumps(answer, indent=2))
    else:
        for line in render(answer):
            typer.echo(line)
    if report_file is not None:  # after the report is out: a page that cannot be written loses only itself
        try:
            write_whole(report_file, render_page(answer, result))
        except OSError as exc:
            typer.echo(f"error: cannot write the report to {report_file}: {exc.strerror or exc}", err=True)
            raise typer.Exit(1) from exc
        typer.echo(f"report: {report_file}", err=True)


def backtest(path: Path, policy_file: Path | None, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The back-test of the recording at ``path``, Karpenter's defaults and ebb's policy: each policy's figures, and
    the whole result (``run_backtest``'s, which the page draws)."""
    require_extra("embedded", "ebb shadow report --trace", "ebb_embedded")
    from ebb.adapters.logs import configure
    from ebb.core.yaml_documents import InputError, parse_yaml
    from ebb_embedded.backtest import (
        POLICY_KINDS,
        BacktestOptions,
        PolicyError,
        karpenter_default,
        policy_of,
        run_backtest,
    )

    recorded = load_trace(str(path), [], start=_epoch(), duration=0.0, seed=seed)
    if not recorded.cluster or recorded.start is None or not recorded.duration:
        raise typer.BadParameter(f"{path}: not a recording (ebb record): no starting cluster, start or duration",
                                 param_hint="--trace")
    documents = list(recorded.cluster)
    try:
        if policy_file is not None:
            text = policy_file.read_text(encoding="utf-8")
            ours = policy_of(policy_file.name, text, parse_yaml(text, str(policy_file)))
        else:
            ours = policy_of("recorded policies", "the recording's", [d for d in documents
                                                                      if d.get("kind") in POLICY_KINDS])
    except (PolicyError, InputError, OSError) as exc:
        raise typer.BadParameter(f"{exc} (give ebb's policy with --policy)",
                                 param_hint="--policy" if policy_file else "--trace") from exc
    configure("error")  # the embedded services' logs: errors only, on stderr (stdout is the report's)
    options = BacktestOptions(start=recorded.start, duration=timedelta(seconds=recorded.duration), seed=seed)
    result = run_backtest(documents, recorded, [karpenter_default(), ours], options)
    figures = {"trace": str(path), "start": result["start"], "durationSeconds": result["duration_seconds"],
               "seed": seed, "policies": [_figures(run) for run in result["policies"]]}
    return figures, result


def _epoch() -> datetime:
    """A start for `load_trace`, which a recording (the only trace taken here) does not read: it has its own."""
    return datetime(1970, 1, 1, tzinfo=UTC)


def _figures(run: dict[str, Any]) -> dict[str, Any]:
    summary = run["summary"]
    return {"name": run["name"], "cost": summary["node_hours_cost"],
            "churn": summary["launches"] + sum(summary["disruptions"].values()),
            "launches": summary["launches"], "disruptions": summary["disruptions"],
            "evictions": summary["evictions"], "pendingPodSeconds": summary["pending_pod_seconds"],
            "pendingPodsAtEnd": summary["pending_pods_at_end"]}


def _get(api: str, token: str, path: str, query: dict[str, str]) -> dict[str, Any]:
    """The API's JSON answer; exit 2 when it refuses the request (token, period), 1 when it cannot answer."""
    import urllib.parse

    return get_api_json(f"{api.rstrip('/')}{path}?{urllib.parse.urlencode(query)}", token, timeout=60)
