"""`ebb backtest`: one workload trace under several disruption policies, side by side.

The trace is a built-in one (``batch-bursts``, ``diurnal``, ``rollout``, ``drift``, ``spot-interruptions``:
``ebb.core.traces``) or an ``ebb.sh/v1 Trace`` file, or several of them run together (``--trace`` repeated); the
cluster is a snapshot (``-f``, as for ``ebb plan``), a recorded trace's own (``ebb record``: its starting
cluster, start and duration), the bundled example, or with
``--empty`` their NodePools, DaemonSets and catalog without nodes or pods. Each ``--policy`` is a file of
``ebb.sh/v1`` DisruptionPolicy and Hold documents; the built-in ``karpenter-default`` always runs first as the
baseline. Every run is the embedded mode in virtual time (``ebb_embedded.backtest``), so the output is
deterministic for the input and ``--seed``. A progress bar on stderr while it runs; the comparison as a table
or JSON on stdout, and with ``--report`` an HTML report (``ebb_cli.report``). A bad trace or policy file exits 2.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
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
    load_trace,
    load_traces,
    not_applied,
    parse_duration_option,
    require_extra,
    snapshot_documents,
    source_and_start,
    trace_warnings,
    unwritable,
    write_whole,
)

if TYPE_CHECKING:
    from ebb.core.traces import Trace
    from ebb_embedded.backtest import Policy

#: the kinds an ``--empty`` start keeps: what a cluster needs to grow from nothing (the storage too: claims and their
#: volumes outlive the pods and nodes that use them, and the Namespaces their pods live in; not a CSINode, which is
#: its node's and goes with it)
EMPTY_KEEPS = ("NodePool", "DaemonSet", "InstanceTypeCatalog", "DisruptionPolicy", "Hold", "PodDisruptionBudget",
               "StorageClass", "PersistentVolume", "PersistentVolumeClaim", "Namespace")


def load_policy(path: Path) -> Policy:
    """The policy file at ``path``, or the built-in policy of that name (``karpenter-balanced``) when no such
    file exists."""
    from ebb.core.yaml_documents import InputError, parse_yaml
    from ebb_embedded.backtest import BUILTIN_POLICIES, PolicyError, policy_of

    if str(path) in BUILTIN_POLICIES and not path.exists():
        return BUILTIN_POLICIES[str(path)]()
    try:
        text = path.read_text(encoding="utf-8")
        docs = parse_yaml(text, str(path))
        return policy_of(path.stem, text, docs)
    except (InputError, OSError, UnicodeDecodeError, PolicyError) as exc:
        raise typer.BadParameter(f"{path}: {exc}", param_hint="--policy") from exc


@contextlib.contextmanager
def _exit_on_sigterm() -> Iterator[None]:
    """SIGTERM raises SystemExit(143) in the main thread while in this block (Python's default would end this
    process at once and leave its workers running); elsewhere, or off the main thread, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _start_worker_server() -> None:
    """Start the server the worker processes are forked from (``run_backtests``) now, so that it imports the
    embedded mode (about 1.2 s) while this process reads the input, not after."""
    import multiprocessing
    from multiprocessing import forkserver

    from ebb_embedded import BACKTEST_WORKER_MODULES

    multiprocessing.get_context("forkserver").set_forkserver_preload(BACKTEST_WORKER_MODULES)
    forkserver.ensure_running()


def recorded_trace(specs: list[str]) -> Trace | None:
    """The first of the ``--trace`` files that is a recording (``ebb record``: it holds its starting cluster): the
    back-test starts from its cluster, at its start, for its duration, unless ``-f``/``--live``, ``--start`` or
    ``--duration`` say otherwise."""
    from ebb.core.traces import BUILTIN

    for spec in specs:
        if spec.partition("@")[0] in BUILTIN:
            continue
        loaded = load_trace(spec, [], start=datetime.now(UTC), duration=0.0, seed=0)
        if loaded.cluster is not None:
            return loaded
    return None


def default_jobs() -> int:
    """One job per CPU this process may run on (its affinity, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _by_method(method: str, summary: dict[str, Any]) -> str:
    return str(summary["disruptions"].get(method, 0))


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def _table(result: dict[str, Any]) -> Any:
    """One run's figures, a column per policy; with more than one policy, each one's churn (launches + disruptions)
    and node-hours cost against the first's (the baseline), as `across_seeds` computes them for several seeds."""
    from rich.table import Table

    from ebb_embedded.backtest import across_seeds

    table = Table(title=f"{result['trace']}: {result['duration_seconds'] / 3600:.3g} h from {result['start']}, "
                        f"seed {result['seed']}")
    table.add_column("")
    for run in result["policies"]:
        table.add_column(run["name"], justify="right")
    rows: list[tuple[str, Any]] = [
        ("node-hours cost ($)", lambda s: f"{s['node_hours_cost']:,.2f}"),
        ("peak nodes", lambda s: str(s["peak_nodes"])),
        ("mean nodes", lambda s: f"{s['mean_nodes']:.1f}"),
        ("launches", lambda s: str(s["launches"])),
        ("disruptions", lambda s: str(sum(s["disruptions"].values()))),
        *[(f"  {method}", partial(_by_method, method))
          for method in sorted({m for r in result["policies"] for m in r["summary"]["disruptions"]})],
        ("evictions", lambda s: str(s["evictions"])),
        ("pods evicted more than once", lambda s: str(s["pods_evicted_more_than_once"])),
        *([("interruptions (pods lost)", lambda s: f"{s['interruptions']} ({s['pods_lost']})")]
          if any(r["summary"].get("interruptions") for r in result["policies"]) else []),
        ("pending p50 / p95 (s)", lambda s: f"{s['pending_seconds_p50']:g} / {s['pending_seconds_p95']:g}"),
        ("churn cost ($)", lambda s: f"{s['churn_cost']:,.2f}"),
        ("launches + disruptions", lambda s: str(s["launches"] + sum(s["disruptions"].values()))),
    ]
    for label, cell in rows:
        table.add_row(label, *[cell(run["summary"]) for run in result["policies"]])
    if len(result["policies"]) > 1:
        against = [entry.get("against_baseline") for entry in across_seeds([result])["policies"].values()]
        for key, label in (("churn_percent", "churn against the baseline"),
                           ("cost_percent", "cost against the baseline")):
            table.add_row(label, *[_percent(entry[key][0]) if entry else "(baseline)" for entry in against])
    return table


def _seeds_table(summed: dict[str, Any]) -> Any:
    """The figures of several seeds' runs: mean (min-max) per policy, and each policy against the baseline."""
    from rich.table import Table

    spread = summed["across_seeds"]
    seeds = spread["seeds"]
    table = Table(title=f"{summed['trace']}: {summed['duration_seconds'] / 3600:.3g} h from {summed['start']}, "
                        f"seeds {seeds[0]}-{seeds[-1]}: mean (min-max)")
    table.add_column("")
    for name in spread["policies"]:
        table.add_column(name, justify="right")

    def cell(s: dict[str, float] | None, money: bool = False, percent: bool = False) -> str:
        if s is None:
            return "-"
        fmt = "{:+.1f}%" if percent else "{:,.2f}" if money else "{:,.1f}"
        return f"{fmt.format(s['mean'])} ({fmt.format(s['min'])} to {fmt.format(s['max'])})"

    labels = {"node_hours_cost": "node-hours cost ($)", "launches": "launches", "disruptions": "disruptions",
              "churn": "launches + disruptions", "evictions": "evictions",
              "pods_evicted_more_than_once": "pods evicted more than once"}
    for figure, label in labels.items():
        table.add_row(label, *[cell(entry[figure], money=figure == "node_hours_cost")
                               for entry in spread["policies"].values()])
    for key, label in (("churn_percent_spread", "churn against the baseline"),
                       ("cost_percent_spread", "cost against the baseline")):
        table.add_row(label, *[cell(entry["against_baseline"][key], percent=True) if "against_baseline" in entry
                               else "(baseline)" for entry in spread["policies"].values()])
    return table


def skipped_events(results: list[dict[str, Any]]) -> list[str]:
    """A line per policy run whose trace had events the cluster could not apply (``trace_errors``): how many, and
    the first few, so a table's reader hears of them too."""
    lines = []
    for result in results:
        for run in result["policies"]:
            errors = run.get("trace_errors") or []
            if errors:
                lines.append(f"{run['name']}, seed {result['seed']}: {not_applied(errors)}")
    return lines


def backtest(  # noqa: PLR0917 - one parameter per command-line option, as typer wants
    trace: Annotated[list[str], typer.Option(
        help="a built-in trace (batch-bursts, diurnal, rollout, drift, spot-interruptions; NAME@PERIOD sets the "
             "period of the first two and the last, e.g. spot-interruptions@30m) or a trace file (YAML or JSON, "
             "docs/backtest.md); repeatable: the traces run together")],
    policy: Annotated[list[Path] | None, typer.Option(
        help="a policy file (ebb.sh/v1 DisruptionPolicy and Hold documents), or the built-in karpenter-balanced; "
             "repeatable. karpenter-default always runs first")] = None,
    boot_time: Annotated[str, typer.Option(
        "--boot-time", help="how long a launched node takes to be Ready (a cloud's start-up time)")] = "60s",
    filename: Annotated[list[str] | None, typer.Option(
        "-f", "--filename", help="snapshot YAML to start from (as for `ebb plan`); default: the bundled "
                                 "example (50 nodes)")] = None,
    live: LiveOption = False,
    kubeconfig: KubeconfigOption = "",
    context: ContextOption = "",
    empty: Annotated[bool, typer.Option("--empty/--no-empty",
                                        help="start from an empty cluster: only the input's "
                                             "NodePools, DaemonSets, PDBs and catalog")] = False,
    start: Annotated[str | None, typer.Option(help="the simulated start time, RFC 3339 (default: now; the "
                                                   "bundled example's own time without -f or --live)")] = None,
    duration: Annotated[str, typer.Option(help="simulated time per policy (default: a recorded trace's own "
                                                "duration, else 24h)")] = "",
    seed: Annotated[int, typer.Option(help="the seed of the trace and of every random choice", min=0)] = 0,
    seeds: Annotated[int, typer.Option(
        help="run the comparison under this many seeds (--seed, --seed + 1, ...) and sum it up: each figure's "
             "mean, min and max, and each policy against the baseline per seed", min=1, max=100)] = 1,
    sample_every: Annotated[str, typer.Option(help="the series' sampling interval (simulated)")] = "5m",
    output: Annotated[Output, typer.Option("-o", "--output", help="table (default) or json")] = Output.table,
    report: Annotated[Path | None, typer.Option(help="write an HTML report here")] = None,
    spot_to_spot: Annotated[bool, typer.Option("--spot-to-spot/--no-spot-to-spot",
                                               help="allow spot-to-spot consolidation")] = False,
    log_level: Annotated[str, typer.Option(help="the services' JSON logs on stderr at this level")] = "error",
    jobs: Annotated[int, typer.Option(
        "-j", "--jobs", help="run this many (seed, policy) runs at once, each in a process of its own; 0: one per "
                             "CPU this process may use. The result does not depend on it", min=0)] = 0,
    reuse_passes: Annotated[bool, typer.Option(
        "--reuse-passes/--no-reuse-passes", hidden=True,
        help="answer a planner pass from the last one while nothing it reads changed (the result is the same; "
             "off: every pass computed, to check that)")] = True,
) -> None:
    """Run a workload trace under each policy and compare cost, churn and pending time."""
    require_extra("embedded", "ebb backtest", "ebb_embedded")
    if min(jobs or default_jobs(), (1 + len(policy or [])) * seeds) > 1:
        _start_worker_server()
    from ebb.adapters.catalog import bundled_catalog
    from ebb.adapters.logs import configure
    from ebb.core.snapshot import SnapshotError, input_warnings, parse_documents
    from ebb.core.yaml_documents import InputError
    from ebb_embedded.backtest import BacktestOptions, across_seeds, apply_policy, karpenter_default, run_backtests

    paths = filename or []
    live, moment = source_and_start(paths, live, kubeconfig, context, start)
    recorded = recorded_trace(trace)
    if recorded is not None and recorded.start is not None and not start:
        moment = recorded.start
    span = parse_duration_option(duration or (f"{recorded.duration}s" if recorded is not None and recorded.duration
                                              else "24h"), "--duration")
    every = parse_duration_option(sample_every, "--sample-every")
    boot = parse_duration_option(boot_time, "--boot-time")
    policies = [karpenter_default(), *[load_policy(p) for p in policy or []]]
    names = [p.name for p in policies]
    if len(set(names)) != len(names):
        raise typer.BadParameter(f"two policies named alike ({', '.join(names)}): name the files apart",
                                 param_hint="--policy")
    try:
        if live:
            documents = live_documents(kubeconfig, context)
        elif not paths and recorded is not None and recorded.cluster is not None:  # where the recording began
            documents = [dict(d) for d in recorded.cluster]
        else:
            documents = snapshot_documents(paths)
        warnings = input_warnings(parse_documents(documents, bundled_catalog))  # of the input as given
        if empty:
            documents = [d for d in documents if d.get("kind") in EMPTY_KEEPS]
        for p in policies:  # checked up front, so a bad document is a message, not a crashed run; a policy changes
            # no Pod, and the input's pods parsed above, so each policy's check leaves them out (most of the input)
            parsed = parse_documents([d for d in apply_policy(documents, p) if d.get("kind") != "Pod"],
                                     bundled_catalog)
        for warning in [*warnings, *trace_warnings(parsed)]:
            typer.echo(f"warning: {warning}", err=True)
    except (InputError, SnapshotError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if report is not None and seeds > 1:
        typer.echo("error: --report draws one run: give it one seed (without --seeds)", err=True)
        raise typer.Exit(2)
    if report is not None:
        problem = unwritable(report)
        if problem:
            raise typer.BadParameter(f"{report}: {problem}", param_hint="--report")
    workloads = [load_traces(trace, documents, start=moment, duration=span.total_seconds(), seed=s)
                 for s in range(seed, seed + seeds)]
    render_report: Any = None
    if report is not None:
        try:  # the renderer is imported only when asked for (and before the run, to fail early)
            render_report = importlib.import_module("ebb_cli.report").render_report
        except (ImportError, AttributeError) as exc:
            typer.echo(f"error: the HTML report needs ebb_cli.report.render_report ({exc})", err=True)
            raise typer.Exit(2) from exc
    configure(log_level)

    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    last_line: dict[tuple[int, str], float] = {}
    runs = [(workload, BacktestOptions(start=moment, duration=span, seed=seed + i, sample_every=every.total_seconds(),
                                       spot_to_spot=spot_to_spot, reuse_passes=reuse_passes,
                                       boot_seconds=boot.total_seconds()))
            for i, workload in enumerate(workloads)]
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[state]}"),
                  TimeElapsedColumn(), console=console, disable=not console.is_terminal) as progress:
        def label(i: int) -> str:
            return f" seed {seed + i}" if seeds > 1 else ""

        bars = {(i, p.name): progress.add_task(f"{p.name + label(i):<24}", total=span.total_seconds(),
                                               state="waiting")
                for i in range(len(runs)) for p in policies}

        def on_status(i: int, p: Policy, status: Any) -> None:
            state = f"{status.nodes} nodes, ${status.cost_per_hour:,.2f}/h, {status.pending_pods} pending"
            progress.update(bars[i, p.name], completed=status.elapsed.total_seconds(), state=state)
            if not console.is_terminal and time.monotonic() - last_line.get((i, p.name), -float("inf")) \
                    >= PROGRESS_EVERY:
                last_line[i, p.name] = time.monotonic()  # no terminal: a line per run every PROGRESS_EVERY s
                elapsed = timedelta(seconds=int(status.elapsed.total_seconds()))  # no microseconds in a log
                console.print(f"ebb backtest: {escape(p.name)}{label(i)}: +{elapsed} {state}", highlight=False,
                              soft_wrap=True)

        try:
            with _exit_on_sigterm():  # so the worker processes are stopped too, as on Ctrl-C
                results = run_backtests(documents, runs, policies, jobs=jobs or default_jobs(), report=on_status,
                                        log_level=log_level)
        except KeyboardInterrupt:
            console.print("ebb backtest: interrupted; the runs were stopped and nothing was written")
            raise typer.Exit(130) from None
        except SystemExit as exc:
            if exc.code == 128 + signal.SIGTERM:
                console.print("ebb backtest: terminated; the runs were stopped and nothing was written")
            raise
    for line in skipped_events(results):
        typer.echo(f"warning: {line}", err=True)
    if seeds > 1:
        summed = {"trace": results[0]["trace"], "start": results[0]["start"],
                  "duration_seconds": results[0]["duration_seconds"], "across_seeds": across_seeds(results),
                  "runs": results}
        if output is Output.json:
            sys.stdout.write(json.dumps(summed, indent=2) + "\n")
            return
        Console().print(_seeds_table(summed))
        return
    result = results[0]
    # the results first: a report that cannot be written after all (the disk filled, the directory went) loses
    # only itself, not the hours of the run
    if output is Output.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        Console().print(_table(result))
    if report is not None:
        try:
            write_whole(report, render_report(result))
        except OSError as exc:
            typer.echo(f"error: cannot write the report to {report}: {exc.strerror or exc}", err=True)
            raise typer.Exit(1) from exc
        console.print(f"report: {report}")
