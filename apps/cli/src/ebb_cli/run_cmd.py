"""`ebb run`: the embedded mode: ebb's services in one process on a simulated cluster.

The cluster comes from snapshot files (the `ebb plan` input) or, given none, from the small example
cluster ebb ships. Time is virtual (``ebb.adapters.virtual_time``): it moves only when every service waits,
so a run is as fast as it computes and deterministic: the same input, options and ``--seed`` print the same
summary on every machine. ``--speed`` only paces it for watching (``--api-port`` paces at x60 unless told). A
table of the cluster's state is redrawn on stderr while it runs, and a summary is printed at the end (table
or JSON). The services themselves live in the ``ebb_embedded`` package (services/embedded), which this
command imports only when it runs.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import signal
import socket
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ebb_cli.common import (
    PROGRESS_EVERY,
    ContextOption,
    KubeconfigOption,
    LiveOption,
    Output,
    live_documents,
    load_traces,
    not_applied,
    parse_duration_option,
    require_extra,
    snapshot_documents,
    source_and_start,
    trace_warnings,
)

if TYPE_CHECKING:
    from ebb_embedded.runner import Summary
    from ebb_embedded.status import Status

#: the pace of a run that serves the decisions-api and was given no --speed (as fast as it computes, the run
#: would be over before anyone could ask)
API_SPEED = 60.0


def _status_table(status: Status, title: str) -> Any:
    from rich.table import Table

    table = Table(title=title, show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("simulated time", f"{status.now:%Y-%m-%d %H:%M:%S}Z (+{_clock(status.elapsed)})")
    table.add_row("nodes", str(status.nodes))
    table.add_row("pods", f"{status.pods} ({status.pending_pods} pending)")
    table.add_row("cost", f"${status.cost_per_hour:,.2f}/h")
    states = status.by_state()
    table.add_row("decisions", ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "none yet")
    table.add_row("evictions", f"{status.evictions} ({status.evictions_refused} refused by PDBs)")
    table.add_row("planner passes", str(status.passes))
    return table


def _progress_line(status: Status) -> str:
    states = ", ".join(f"{n} {s}" for s, n in sorted(status.by_state().items())) or "no decisions yet"
    return (f"ebb run: {status.now:%Y-%m-%d %H:%M:%S}Z (+{_clock(status.elapsed)}): {status.nodes} nodes, "
            f"{status.pods} pods ({status.pending_pods} pending), ${status.cost_per_hour:,.2f}/h; {states}; "
            f"{status.passes} passes")


def _clock(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m{seconds % 60:02d}s"


def _summary_json(summary: Summary) -> dict[str, Any]:
    def side(status: Status) -> dict[str, Any]:
        return {"time": status.now.strftime("%Y-%m-%dT%H:%M:%SZ"), "nodes": status.nodes, "pods": status.pods,
                "pendingPods": status.pending_pods, "costPerHour": round(status.cost_per_hour, 4)}

    decisions: dict[str, dict[str, int]] = {}
    for (state, method), n in sorted(summary.end.decisions.items()):
        decisions.setdefault(method, {})[state] = n
    return {"start": side(summary.start), "end": side(summary.end), "stoppedBecause": summary.stopped_because,
            "simulated": _clock(summary.end.elapsed), "decisions": decisions,
            "evictions": summary.end.evictions, "evictionsRefused": summary.end.evictions_refused,
            "nodesDeleted": summary.end.nodes_deleted, "passes": summary.end.passes,
            "passesReused": summary.end.passes_reused,
            "database": str(summary.database) if summary.database else None}


#: the first bytes of every SQLite 3 database file
SQLITE_HEADER = b"SQLite format 3\x00"


def _change_line(start: Status, end: Status) -> str:
    """What the run changed, in words: the cost per hour saved or added, and the nodes removed or added (a trace
    can grow the cluster)."""
    saved = start.cost_per_hour - end.cost_per_hour
    cost = f"saved ${saved:,.2f}/h" if saved >= 0 else f"cost ${-saved:,.2f}/h more"
    removed = start.nodes - end.nodes
    count = abs(removed)
    nodes = f"{count} node{'' if count == 1 else 's'} {'removed' if removed >= 0 else 'added'}"
    return f"{cost} ({nodes})"


def _port_problem(port: int) -> str | None:
    """Why the decisions-api cannot listen on 127.0.0.1:``port`` (checked before the run, which would otherwise
    end in uvicorn's start-up failure); None when it can."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            return f"cannot be listened on: {exc.strerror or exc}"
    return None


def _database_problem(path: Path) -> str | None:
    """Why ``--database`` cannot hold the run's decisions (checked before the run); None when it can: a SQLite
    file, an empty file, or a file to be made (its missing directories are made)."""
    if path.is_dir():
        return "is a directory"
    if not path.exists():
        return None
    try:
        with path.open("rb") as file:
            head = file.read(len(SQLITE_HEADER))
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if head and head != SQLITE_HEADER:
        return "is not a SQLite database"
    return None


def run(  # noqa: PLR0917 - one parameter per command-line option, as typer wants
    filename: Annotated[list[str] | None, typer.Option(
        "-f", "--filename", help="snapshot YAML (as for `ebb plan`); '-' for stdin; repeatable. "
                                 "Default: the example cluster ebb ships (50 nodes).")] = None,
    live: LiveOption = False,
    kubeconfig: KubeconfigOption = "",
    context: ContextOption = "",
    start: Annotated[str | None, typer.Option(
        help="the simulated start time, RFC 3339 (default: now; the bundled example's own time without -f or "
             "--live)")] = None,
    speed: Annotated[float | None, typer.Option(
        help="for watching: at most this many simulated seconds per real second (default: as fast as it "
             "computes; x60 with --api-port); it never changes the result", min=0.1, max=3600)] = None,
    duration: Annotated[str, typer.Option(help="stop after this much simulated time")] = "2h",
    until_stable: Annotated[bool, typer.Option(
        "--until-stable/--no-until-stable",
        help="stop once nothing has happened for --stable-for (simulated)")] = False,
    stable_for: Annotated[str, typer.Option(help="see --until-stable")] = "10m",
    database: Annotated[Path | None, typer.Option(
        help="keep the decisions in this SQLite file (default: in memory, for the run alone)")] = None,
    spot_to_spot: Annotated[bool, typer.Option("--spot-to-spot/--no-spot-to-spot",
                                               help="allow spot-to-spot consolidation")] = False,
    engine_options: Annotated[Path | None, typer.Option(
        help="the engine options the planner and the API read: the ConfigMap ebb-engine-options as YAML (what it "
             "sets replaces --spot-to-spot)")] = None,
    output: Annotated[Output, typer.Option("-o", "--output",
                                           help="the summary: table (default) or json")] = Output.table,
    log_level: Annotated[str, typer.Option(help="the services' JSON logs on stderr at this level")] = "warning",
    api_port: Annotated[int | None, typer.Option(
        help="serve the decisions-api on 127.0.0.1:PORT while it runs (in simulated time)", min=1, max=65535)] = None,
    api_token: Annotated[str | None, typer.Option(
        help="the API's bearer token (default: a random one, printed on stderr)", envvar="EBB_RUN_API_TOKEN")] = None,
    seed: Annotated[int, typer.Option(
        help="the seed of every random choice of the run (new pods' names, decision ids)", min=0)] = 0,
    pass_cost: Annotated[str, typer.Option(
        help="the simulated time a planner pass (and a validation) takes; computation takes none otherwise")] = "0s",
    trace: Annotated[list[str] | None, typer.Option(
        help="drive the workload with a trace while ebb runs: a built-in one (batch-bursts, diurnal, rollout, "
             "drift, spot-interruptions; NAME@PERIOD for another period) or a trace file; repeatable: the traces "
             "run together. A provisioner then launches nodes for Pending pods")] = None,
    reuse_passes: Annotated[bool, typer.Option(
        "--reuse-passes/--no-reuse-passes", hidden=True,
        help="answer a planner pass from the last one while nothing it reads changed (the result is the same; "
             "off: every pass computed, to check that)")] = True,
) -> None:
    """Run ebb's services in one process on a simulated cluster (the embedded mode)."""
    require_extra("embedded", "ebb run", "ebb_embedded")
    if database is not None:
        require_extra("sqlite", "ebb run --database", "sqlalchemy", "aiosqlite", "alembic")
    if api_port is not None:
        require_extra("api", "ebb run --api-port", "ebb_decisions_api", "sqlalchemy", "aiosqlite", "alembic")
    from ebb.adapters.logs import configure
    from ebb.core.yaml_documents import InputError
    from ebb_embedded.runner import EmbeddedOptions, run_embedded, simulation_runner

    if api_port is not None:
        problem = _port_problem(api_port)
        if problem:
            raise typer.BadParameter(f"127.0.0.1:{api_port} {problem}", param_hint="--api-port")
    if database is not None:
        problem = _database_problem(database)
        if problem:
            raise typer.BadParameter(f"{database}: {problem}", param_hint="--database")
    if engine_options is not None:  # checked up front: a bad object is a message, not a crashed service
        from ebb.adapters.engine_options import read_data
        from ebb.core.options import EngineOptionsError, parse_engine_options

        try:
            if read_data(engine_options) is None:
                raise EngineOptionsError([f"{engine_options}: no such file or directory"])
            parse_engine_options(read_data(engine_options) or {})
        except (EngineOptionsError, OSError) as exc:
            raise typer.BadParameter(str(exc), param_hint="--engine-options") from exc
    paths = filename or []
    live, moment = source_and_start(paths, live, kubeconfig, context, start)
    token = api_token or (secrets.token_urlsafe(24) if api_port else "")
    pace = speed if speed is not None else API_SPEED if api_port else None
    options = EmbeddedOptions(start=moment, speed=pace, duration=parse_duration_option(duration, "--duration"),
                              until_stable=until_stable,
                              stable_for=parse_duration_option(stable_for, "--stable-for"),
                              database=database, spot_to_spot=spot_to_spot, api_port=api_port, api_token=token,
                              seed=seed, pass_cost=parse_duration_option(pass_cost, "--pass-cost", zero=True),
                              reuse_passes=reuse_passes, engine_options=engine_options)
    from ebb.adapters.catalog import bundled_catalog
    from ebb.core.snapshot import SnapshotError, input_warnings, parse_documents

    try:
        documents = live_documents(kubeconfig, context) if live else snapshot_documents(paths)
        # checked up front with the parser every service uses, so bad input is a message, not a crashed task
        snapshot = parse_documents(documents, bundled_catalog)
    except (InputError, SnapshotError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    for warning in input_warnings(snapshot):
        typer.echo(f"warning: {warning}", err=True)
    workload: dict[str, Any] = {}
    skipped: list[str] = []  # the trace's events the cluster could not apply
    if trace:  # the cluster's workload changes, and a provisioner launches for it
        from ebb_embedded.backtest import workload_tasks
        from ebb_embedded.workload import WorkloadCluster

        for warning in trace_warnings(snapshot):
            typer.echo(f"warning: {warning}", err=True)

        events = load_traces(trace, documents, start=moment, duration=options.duration.total_seconds(), seed=seed)
        workload = {"cluster_factory": WorkloadCluster, "more_tasks": workload_tasks(events, errors=skipped)}
    configure(log_level)

    import asyncio

    from rich.console import Console
    from rich.live import Live

    console = Console(stderr=True)
    if api_port:
        console.print(f"decisions-api on http://127.0.0.1:{api_port} (console at /ui, docs at /docs), token: {token}")

    async def main() -> Summary:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        if not console.is_terminal:  # a log, not a live table: one line every PROGRESS_EVERY real seconds
            last = [-float("inf")]

            def progress(status: Status) -> None:
                if time.monotonic() - last[0] >= PROGRESS_EVERY:
                    last[0] = time.monotonic()
                    console.print(_progress_line(status), highlight=False, soft_wrap=True)

            return await run_embedded(documents, options, stop, report=progress, **workload)
        with Live(console=console, transient=True, auto_refresh=False) as live:
            def report(status: Status) -> None:
                live.update(_status_table(status, f"ebb run (x{pace:g})" if pace else "ebb run"), refresh=True)

            return await run_embedded(documents, options, stop, report=report, **workload)

    try:
        with simulation_runner(options) as runner:
            summary = runner.run(main())
    except ValueError as exc:  # SnapshotError: an invalid document, named
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if skipped:
        typer.echo(f"warning: {not_applied(skipped)}", err=True)
    if output is Output.json:
        sys.stdout.write(json.dumps(_summary_json(summary), indent=2) + "\n")
        return
    out = Console()
    out.print(_status_table(summary.start, "start"))
    out.print(_status_table(summary.end, f"end ({summary.stopped_because})"))
    data = _summary_json(summary)
    for method, states in data["decisions"].items():
        out.print(f"  {method}: " + ", ".join(f"{n} {s}" for s, n in states.items()))
    out.print(f"{_change_line(summary.start, summary.end)} in {_clock(summary.end.elapsed)} of simulated time")
