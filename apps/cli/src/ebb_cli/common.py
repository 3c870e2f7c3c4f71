"""What the commands share: where a command's cluster comes from, its option values, traces and output format.

``ebb plan``, ``ebb explain``, ``ebb run``, ``ebb backtest`` and ``ebb db`` each live in a module of their own
(``plan_cmd``, ``explain_cmd``, ``run_cmd``, ``backtest_cmd``, ``db``) and do not import each other: what two of
them use is here, or, for making and printing a plan (``ebb plan`` and ``ebb explain``), in ``ebb_cli.planning``
(an import-linter contract, ``cli-layers``, keeps it so).

- **Input**: ``-f`` files (a kubectl dump; ``snapshot_documents``, the bundled example cluster without any) or,
  with ``--live``, the cluster itself (``live_documents``). The ``--live``, ``--kubeconfig`` and ``--context``
  options share their rules: ``--kubeconfig`` or ``--context`` imply ``--live``; ``--live`` and ``-f`` together are
  an input error (``wants_live``); a cluster that cannot be read is an input error that says why
  (`ebb.adapters.kube.read`). What was read is summed up on stderr, and on a terminal counted while it is read.
  ``source_and_start`` adds the simulated start of ``ebb run`` and ``ebb backtest``.
- **Option values**: ``parse_time_option`` and ``parse_duration_option`` turn an option's text into a value or a
  ``typer.BadParameter`` that names the option.
- **Traces**: ``load_trace`` / ``load_traces`` (a built-in trace or a trace file, several run together) and
  ``trace_warnings``, for ``ebb run --trace`` and ``ebb backtest``.
- **Help**: ``FlagCommand`` and ``FlagGroup``, the classes of every command and group, show a boolean flag as a
  flag (``--until-stable``, ``--no-until-stable``) where typer would show it as taking a ``<bool>``.
- **Extras**: ``require_extra`` stops a command whose use needs an extra of ``ebb-cli`` that is not installed
  (``live``, ``embedded``, ``api``, ``db``; apps/cli/pyproject.toml) with a message that names it, before anything
  runs.
- **Output**: the ``-o`` formats (``Output``), the progress line interval without a terminal (``PROGRESS_EVERY``),
  the line that names a trace's events the cluster could not apply (``not_applied``), and the files a command
  writes (a report, a recording): checked before a run that may take hours (``unwritable``), and written whole or
  not at all (``write_whole``).

``ebb --help`` imports this module with every command, so it imports only typer and ``ebb.core.quantity`` at the
top: the rest of the library, rich and pydantic are imported by the functions that use them.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from ebb.core.quantity import TIME_EXAMPLE, QuantityError, parse_duration, parse_time

if TYPE_CHECKING:
    from ebb.core.model import Snapshot
    from ebb.core.traces import Trace

#: the example cluster ebb ships (in ``ebb.data``), the input of ``ebb run`` and ``ebb backtest`` without ``-f``
EXAMPLE_CLUSTER = "example-cluster.yaml"
#: the simulated time the bundled example was generated for (examples/generate.py)
EXAMPLE_NOW = "2026-11-23T18:30:00Z"
#: without a terminal, a progress line on stderr this often (real seconds)
PROGRESS_EVERY = 10.0
#: the trace events not applied that a warning names, per run (the rest are counted; JSON lists them all)
SKIPPED_SHOWN = 3

LiveOption = Annotated[bool, typer.Option(
    "--live/--no-live",
    help="read the cluster itself (the current kubeconfig context) instead of -f files")]
KubeconfigOption = Annotated[str, typer.Option(
    help="with --live: this kubeconfig (default: $KUBECONFIG or ~/.kube/config); implies --live")]
ContextOption = Annotated[str, typer.Option(
    help="with --live: this kubeconfig context (default: the current one); implies --live")]


def _flags_as_flags(params: list[Any]) -> list[Any]:
    """``params``, each boolean flag given an empty metavar: typer's help shows the metavar in place of the type,
    so a flag shows no ``<bool>`` (``--help`` and the completion options included)."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class FlagCommand(TyperCommand):
    """A command whose help shows its boolean options as flags (`_flags_as_flags`)."""

    def get_params(self, ctx: Any) -> list[Any]:  # typer's own click types (typer._click), not importable
        return _flags_as_flags(super().get_params(ctx))


class FlagGroup(TyperGroup):
    """A group whose help shows its boolean options as flags (`_flags_as_flags`)."""

    def get_params(self, ctx: Any) -> list[Any]:  # typer's own click types (typer._click), not importable
        return _flags_as_flags(super().get_params(ctx))


class Output(StrEnum):
    """What a command prints on stdout: a table for people, or JSON for programs."""

    table = "table"
    json = "json"


# -- extras -----------------------------------------------------------------------------------------------------


def require_extra(extra: str, use: str, *modules: str) -> None:
    """Exit 2 with the install line when one of ``modules`` (top-level names) is missing: ``use`` needs
    ``ebb-cli[extra]``. A module is looked up, not imported, so the check costs nothing when it passes."""
    from importlib.util import find_spec

    missing = [m for m in modules if find_spec(m) is None]
    if missing:
        typer.echo(f"error: {use} needs ebb-cli's {extra!r} extra ({', '.join(missing)} is not installed): "
                   f"pip install 'ebb-cli[{extra}]'", err=True)
        raise typer.Exit(2)


# -- input ------------------------------------------------------------------------------------------------------


def wants_live(live: bool, kubeconfig: str, context: str, paths: list[str]) -> bool:
    """Whether the cluster is read live; an InputError when ``-f`` files are given too."""
    from ebb.core.yaml_documents import InputError

    live = live or bool(kubeconfig or context)
    if live and paths:
        raise InputError("give either -f FILE (a kubectl dump) or --live (read the cluster), not both")
    return live


def live_documents(kubeconfig: str, context: str) -> list[dict[str, Any]]:
    """The cluster's objects, as a kubectl dump would hold them (trimmed); what was read said on stderr."""
    require_extra("live", "--live", "kubernetes_asyncio")
    import asyncio

    from rich.console import Console

    from ebb.adapters.kube.read import ClusterReadError, read_cluster_from
    from ebb.core.yaml_documents import InputError

    console = Console(stderr=True)
    if not console.is_terminal:
        typer.echo("reading the cluster ...", err=True)
    try:
        # on a terminal, a line that counts what has been read so far (a large cluster's pods take a while)
        with console.status("reading the cluster ...") as status:
            read = asyncio.run(read_cluster_from(
                kubeconfig, context,
                progress=lambda kind, count: status.update(f"reading the cluster: {count:,} {kind} ...")))
    except ClusterReadError as exc:
        raise InputError(f"--live: {exc}") from exc
    typer.echo(read.summary(), err=True)
    return read.documents


def snapshot_documents(paths: list[str]) -> list[Any]:
    """The objects of the snapshot files (``kind: List`` documents flattened), or of the bundled example."""
    from ebb.adapters.snapshot_files import read_documents
    from ebb.core.yaml_documents import parse_yaml

    if paths:
        raw: list[Any] = [doc for path in paths for doc in read_documents(path)]
    else:
        raw = parse_yaml(resources.files("ebb.data").joinpath(EXAMPLE_CLUSTER).read_text(encoding="utf-8"),
                         EXAMPLE_CLUSTER)
    documents: list[Any] = []
    for doc in raw:
        if not isinstance(doc, dict):
            continue
        if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
            documents.extend(d for d in doc["items"] if isinstance(d, dict))
        else:
            documents.append(doc)
    return documents


def source_and_start(paths: list[str], live: bool, kubeconfig: str, context: str,
                     start: str | None) -> tuple[bool, datetime]:
    """Whether the cluster is read live (exit 2 with ``-f`` as well), and the simulated start: ``--start``, else
    now for a dump or the live cluster, else the bundled example's own time."""
    from ebb.core.yaml_documents import InputError

    try:
        live = wants_live(live, kubeconfig, context, paths)
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if start:
        return live, parse_time_option(start, "--start")
    return live, datetime.now(UTC) if paths or live else parse_time_option(EXAMPLE_NOW, "--start")


# -- option values ----------------------------------------------------------------------------------------------


def parse_time_option(value: str, option: str) -> datetime:
    """An RFC 3339 time given to ``option``; typer.BadParameter when it is none."""
    try:
        return parse_time(value)
    except ValueError as exc:
        raise typer.BadParameter(f"{value!r} is not an RFC 3339 time from 1970 to 2262 like {TIME_EXAMPLE}",
                                 param_hint=option) from exc


def parse_duration_option(value: str, option: str, *, zero: bool = False) -> timedelta:
    """A positive duration (``zero``: or zero) given to ``option``; typer.BadParameter when it is none."""
    try:
        seconds = parse_duration(value)
    except (QuantityError, ValueError) as exc:
        raise typer.BadParameter(f"{value!r} is not a duration like 90s, 15m or 2h", param_hint=option) from exc
    if seconds is None or seconds < 0 or (seconds == 0 and not zero):
        raise typer.BadParameter(f"{value!r}: must be a {'non-negative' if zero else 'positive'} duration",
                                 param_hint=option)
    return timedelta(seconds=seconds)


# -- traces -----------------------------------------------------------------------------------------------------


def load_trace(spec: str, documents: list[Any], *, start: datetime, duration: float, seed: int) -> Trace:
    """A built-in trace by name (``NAME@PERIOD``: with that period, `ebb.core.traces.PERIODIC`), or a trace file
    (YAML or JSON); typer.BadParameter names what is wrong."""
    from pydantic import ValidationError

    from ebb.core.traces import BUILTIN, Trace, builtin_trace
    from ebb.core.yaml_documents import InputError, parse_yaml

    name, _, period = spec.partition("@")
    if name in BUILTIN:  # NAME or NAME@PERIOD
        try:
            every = parse_duration(period) if period else None
            if period and every is None:  # "Never"
                raise ValueError(period)
        except ValueError as exc:  # QuantityError too
            raise typer.BadParameter(f"{spec!r}: {period!r} is not a duration like 90s, 15m or 2h",
                                     param_hint="--trace") from exc
        try:
            trace = builtin_trace(name, documents, start=start, duration=duration, seed=seed, every=every)
        except ValueError as exc:
            raise typer.BadParameter(f"{spec!r}: {exc}", param_hint="--trace") from exc
        return trace.model_copy(update={"name": spec})  # the period in its name, as given
    path = Path(spec)
    if not path.is_file():
        raise typer.BadParameter(f"{spec!r} is neither a built-in trace ({', '.join(sorted(BUILTIN))}) nor a file",
                                 param_hint="--trace")
    try:
        docs = parse_yaml(path.read_text(encoding="utf-8"), spec)
    except (InputError, OSError, UnicodeDecodeError) as exc:
        raise typer.BadParameter(f"{spec}: {exc}", param_hint="--trace") from exc
    if len(docs) != 1:
        raise typer.BadParameter(f"{spec}: a trace file holds one ebb.sh/v1 Trace document, not {len(docs)}",
                                 param_hint="--trace")
    try:
        return Trace.model_validate(docs[0])
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc']) or '(document)'}: {e['msg']}"
                             for e in exc.errors())
        raise typer.BadParameter(f"{spec}: not a valid trace: {problems}", param_hint="--trace") from exc


def load_traces(specs: list[str], documents: list[Any], *, start: datetime, duration: float, seed: int) -> Trace:
    """`load_trace` of each of ``specs``, run together as one trace (``ebb.core.traces.combined``)."""
    from ebb.core.traces import combined

    return combined([load_trace(spec, documents, start=start, duration=duration, seed=seed) for spec in specs])


def trace_warnings(snapshot: Snapshot) -> list[str]:
    """What a user should hear before a trace runs on ``snapshot``: a cluster without a NodePool gives the
    simulated provisioner nowhere to launch, so the pods a trace adds that fit on no node stay Pending."""
    if snapshot.nodepools:
        return []
    return ["the input holds no NodePool: the simulated provisioner has nowhere to launch, so the pods the trace "
            "adds that fit on no node stay Pending (kubectl get nodepools -o yaml adds them to a dump)"]


# -- output -----------------------------------------------------------------------------------------------------


def not_applied(errors: list[str]) -> str:
    """The trace's events the cluster could not apply, in a line: how many, the first `SKIPPED_SHOWN` named."""
    more = f" (and {len(errors) - SKIPPED_SHOWN} more)" if len(errors) > SKIPPED_SHOWN else ""
    return f"{len(errors)} trace event(s) not applied: {'; '.join(errors[:SKIPPED_SHOWN])}{more}"


def unwritable(path: Path) -> str | None:
    """Why a file cannot be written at ``path``, checked before a run that may take hours; None when it can."""
    if path.is_dir():
        return "is a directory"
    parent = path.parent
    if not parent.is_dir():
        return f"its directory {parent} does not exist"
    if not os.access(parent, os.W_OK):
        return f"its directory {parent} is not writable"
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is not writable"
    return None


def write_whole(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: to a file beside it, then renamed over it (a crash or a full
    disk leaves the earlier file, or none, never half of it)."""
    partial_file = path.with_name(f".{path.name}.partial")
    try:
        partial_file.write_text(text, encoding="utf-8")
        partial_file.replace(path)
    finally:
        partial_file.unlink(missing_ok=True)


def get_api_json(url: str, token: str, *, timeout: float, what: str = "") -> dict[str, Any]:
    """GET ``url`` of the decisions-api with the bearer ``token``: its JSON answer. Exit 2 when the API refuses the
    request (401, 403, 404, 422), 1 when it cannot answer; the message on stderr, after ``what`` (e.g. ``--api: ``),
    names the URL and the API's ``detail``."""
    import json
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer
    except urllib.error.HTTPError as exc:
        try:
            detail = json.loads(exc.read()).get("detail", exc.reason)
        except ValueError:
            detail = exc.reason
        typer.echo(f"error: {what}{url} answered {exc.code}: {detail}", err=True)
        raise typer.Exit(2 if exc.code in {401, 403, 404, 422} else 1) from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        typer.echo(f"error: {what}cannot ask {url}: {getattr(exc, 'reason', exc)}", err=True)
        raise typer.Exit(1) from exc
