"""`ebb record`: a live cluster's history written as an ``ebb.sh/v1 Trace`` that ``ebb backtest`` replays.

Where it reads (``ebb.adapters.record``): the apiserver (``--live``, the default; ``--kubeconfig``, ``--context``)
or the cluster-watcher's topic of a deployed ebb (``--from-kafka BOOTSTRAP``, ``--topic-prefix``), which needs no
laptop: the same command runs as a pod for a week. What it writes (``ebb.core.recording``): the cluster at the
start, every pod's arrival and departure with its owner, requests and constraints, and the node launches and
removals the cluster's own provisioner and disrupter made, with who and why; with ``--anonymize``, names hashed.

It records for ``--duration`` (or until Ctrl-C or SIGTERM), with a status line on stderr (elapsed, remaining,
counts; without a terminal, a line every ``PROGRESS_EVERY`` seconds), and writes the trace to ``-o`` whole (a file
beside it, renamed over it) every ``--save-every`` and at the end: a stopped recording keeps what it recorded,
and one that is killed loses at most the last interval. ``.json`` files are JSON, anything else YAML.

Exit codes: 0 when the duration is recorded, 130 when stopped early (the trace written up to then), 2 for bad
input (an option, a cluster or a Kafka that cannot be read: said before anything is recorded), 1 when the trace
cannot be written.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import signal
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ebb_cli.common import (
    PROGRESS_EVERY,
    ContextOption,
    KubeconfigOption,
    parse_duration_option,
    require_extra,
    unwritable,
    write_whole,
)

if TYPE_CHECKING:
    import asyncio

    from ebb.core.recording import Recorder
    from ebb.core.traces import Trace


def trace_text(trace: Trace, path: Path) -> str:
    """The trace as its file holds it: JSON for ``.json``, else YAML."""
    document = trace.model_dump(by_alias=True, mode="json", exclude_none=True)
    if path.suffix.lower() == ".json":
        return json.dumps(document, indent=1) + "\n"
    import yaml

    return str(yaml.safe_dump(document, sort_keys=False, width=120))


def write_trace(trace: Trace, path: Path) -> None:
    """Write the trace whole or not at all (a file beside it, renamed over it)."""
    write_whole(path, trace_text(trace, path))


def _status(recorder: Recorder, elapsed: float, total: float) -> str:
    c = recorder.counts
    left = max(total - elapsed, 0.0)
    return (f"recording {timedelta(seconds=int(elapsed))} of {timedelta(seconds=int(total))} "
            f"({timedelta(seconds=int(left))} left): {c.arrivals} pods arrived, {c.departures} departed, "
            f"{c.moved} moved by disruptions; {c.launches} nodes launched, {c.removals} removed")


def record(  # noqa: PLR0917 - one parameter per command-line option, as typer wants
    output: Annotated[Path, typer.Option("-o", "--output", help="write the trace here (.json: JSON, else YAML)")],
    duration: Annotated[str, typer.Option(help="how long to record (e.g. 2h; a week is 168h)")] = "1h",
    live: Annotated[bool, typer.Option(
        "--live/--no-live", help="read the cluster of the kubeconfig's context (the default without "
                                 "--from-kafka)")] = False,
    kubeconfig: KubeconfigOption = "",
    context: ContextOption = "",
    from_kafka: Annotated[str, typer.Option(
        "--from-kafka", metavar="BOOTSTRAP",
        help="record from a deployed ebb's cluster-watcher topic on this Kafka instead of the apiserver")] = "",
    topic_prefix: Annotated[str, typer.Option(help="with --from-kafka: the deployment's topic prefix")] = "",
    name: Annotated[str, typer.Option(help="the trace's name (default: recorded-<start time>)")] = "",
    anonymize: Annotated[bool, typer.Option(
        "--anonymize/--no-anonymize",
        help="hash namespaces, pod, owner, node and NodeClaim names and pod label values (NodePool names stay)")]
    = False,
    anonymize_key: Annotated[str, typer.Option(
        envvar="EBB_ANONYMIZE_KEY",
        help="with --anonymize: the hash's key, to get the same hashes in two recordings (default: a random one, "
             "never written)")] = "",
    save_every: Annotated[str, typer.Option(help="write what was recorded so far this often")] = "5m",
    events: Annotated[bool, typer.Option(
        "--events/--no-events",
        help="with --live: read Karpenter's and ebb's disruption Events for why nodes went")] = True,
) -> None:
    """Record a live cluster's pods and node changes as a trace for `ebb backtest --trace`."""
    span = parse_duration_option(duration, "--duration").total_seconds()
    save = parse_duration_option(save_every, "--save-every").total_seconds()
    if from_kafka and (live or kubeconfig or context):
        raise typer.BadParameter("give either --from-kafka (the cluster-watcher's topic) or --live (the "
                                 "apiserver), not both", param_hint="--from-kafka")
    if anonymize_key and not anonymize:
        raise typer.BadParameter("is only used with --anonymize", param_hint="--anonymize-key")
    if kubeconfig and not Path(kubeconfig).is_file():
        raise typer.BadParameter(f"{kubeconfig}: no such file", param_hint="--kubeconfig")
    problem = unwritable(output)
    if problem:
        raise typer.BadParameter(f"{output}: {problem}", param_hint="--output")
    key = (anonymize_key.encode("utf-8") or secrets.token_bytes(32)) if anonymize else None
    require_extra("record", "ebb record", "kubernetes_asyncio", "structlog", *(["aiokafka"] if from_kafka else []))
    import asyncio  # here, not at the top: `ebb --help` stays light

    code = asyncio.run(_record(output, span, save, kubeconfig=kubeconfig, context=context, kafka=from_kafka,
                               prefix=topic_prefix, name=name, key=key, events=events))
    if code:
        raise typer.Exit(code)


async def _record(output: Path, span: float, save: float, *, kubeconfig: str, context: str, kafka: str,
                  prefix: str, name: str, key: bytes | None, events: bool) -> int:
    import asyncio

    from rich.console import Console

    from ebb.adapters.clock import Clock
    from ebb.core.recording import Anonymizer, Recorder

    console = Console(stderr=True)
    clock = Clock()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        async with contextlib.AsyncExitStack() as stack:
            try:
                started, follow = await _open(stack, clock, stop, kubeconfig=kubeconfig, context=context,
                                              kafka=kafka, prefix=prefix, events=events, console=console)
            except _InputError as exc:
                typer.echo(f"error: {exc}", err=True)
                return 2
            recorder = Recorder(start=started.at, documents=started.documents,
                                anonymizer=Anonymizer(key) if key is not None else None)
            trace_name = name or f"recorded-{started.at.strftime('%Y%m%dT%H%M%SZ')}"
            description = f"recorded from {started.source} from {started.at.isoformat()}"
            typer.echo(f"ebb record: from {started.source}, {len(started.documents):,} objects at the start; "
                       f"writing {output} every {timedelta(seconds=int(save))}", err=True)
            task = asyncio.create_task(follow(recorder), name="record")
            began = time.monotonic()
            last_save = last_line = began
            ended_early = False
            with console.status(_status(recorder, 0.0, span)) as status:
                while True:
                    elapsed = time.monotonic() - began
                    if elapsed >= span:
                        break
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), timeout=min(1.0, span - elapsed))
                    if stop.is_set():
                        ended_early = True
                        break
                    if task.done():
                        break  # the source failed: its error is said below, what was recorded is written
                    now = time.monotonic()
                    status.update(_status(recorder, now - began, span))
                    if not console.is_terminal and now - last_line >= PROGRESS_EVERY:
                        last_line = now
                        console.print(f"ebb record: {_status(recorder, now - began, span)}", highlight=False,
                                      soft_wrap=True)
                    if now - last_save >= save:
                        last_save = now
                        _save(recorder, clock, output, trace_name, description)
            stop.set()
            failure: BaseException | None = None
            try:
                await task
            except Exception as exc:  # the source's failure: said, and what was recorded is written
                failure = exc
            if not _save(recorder, clock, output, trace_name, description):
                return 1
            elapsed = time.monotonic() - began
            console.print(f"ebb record: {_status(recorder, min(elapsed, span), span)}", highlight=False,
                          soft_wrap=True)
            if failure is not None:
                typer.echo(f"error: recording stopped: {failure}; wrote what was recorded to {output}", err=True)
                return 1
            if ended_early:
                typer.echo(f"ebb record: stopped early; wrote what was recorded to {output}", err=True)
                return 130
            typer.echo(f"ebb record: wrote {output}", err=True)
            return 0
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def _save(recorder: Recorder, clock: Any, output: Path, name: str, description: str) -> bool:
    try:
        write_trace(recorder.trace(clock.now(), name=name, description=description), output)
    except OSError as exc:
        typer.echo(f"error: cannot write the trace to {output}: {exc.strerror or exc}", err=True)
        return False
    return True


class _InputError(Exception):
    """The source cannot be read: said before anything is recorded."""


async def _open(stack: contextlib.AsyncExitStack, clock: Any, stop: asyncio.Event, *, kubeconfig: str,
                context: str, kafka: str, prefix: str, events: bool, console: Any) -> tuple[Any, Any]:
    """The recording's start and the coroutine function that follows its source into a recorder."""
    import asyncio

    if kafka:
        from ebb.adapters.bus import KafkaBus
        from ebb.adapters.record import read_start_from_bus, record_from_bus

        bus = KafkaBus(kafka, prefix=prefix, client_id="ebb-record")
        try:
            await asyncio.wait_for(bus.ping(), timeout=30)
            await stack.enter_async_context(bus)
            started, offsets = await read_start_from_bus(bus, clock, f"kafka {kafka}")
        except Exception as exc:
            raise _InputError(f"--from-kafka {kafka}: cannot read the cluster-watcher's topic: {exc!r}") from exc

        async def follow_bus(recorder: Any) -> None:
            await record_from_bus(bus, offsets, recorder, stop, clock=clock, group=f"ebb-record-{uuid.uuid4().hex}")

        return started, follow_bus

    from kubernetes_asyncio.config import ConfigException

    from ebb.adapters.kube.client import kube_client
    from ebb.adapters.kube.read import ClusterReadError
    from ebb.adapters.record import read_start, record_live

    try:
        api = await stack.enter_async_context(kube_client(kubeconfig, context, component="ebb-record"))
        with console.status("reading the cluster ...") as status:
            started, read = await read_start(
                api, clock, progress=lambda kind, count: status.update(f"reading the cluster: {count:,} {kind} ..."))
    except (ConfigException, OSError, ClusterReadError) as exc:
        where = kubeconfig or "the default kubeconfig ($KUBECONFIG or ~/.kube/config)"
        raise _InputError(f"--live: cannot read the cluster of {where}: {exc}") from exc
    typer.echo(read.summary(), err=True)

    async def follow_live(recorder: Any) -> None:
        await record_live(api, started, recorder, stop, clock=clock, events=events)

    return started, follow_live
