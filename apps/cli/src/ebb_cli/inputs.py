"""Where a command's cluster comes from: ``-f`` files (a kubectl dump) or, with ``--live``, the cluster itself.

``ebb plan``, ``ebb run`` and ``ebb backtest`` share the ``--live``, ``--kubeconfig`` and ``--context`` options
and their rules: ``--kubeconfig`` or ``--context`` imply ``--live``; ``--live`` and ``-f`` together are an input
error; a cluster that cannot be read is an input error that says why (`ebb.adapters.kube.read`). What was read is
summed up on stderr, and on a terminal counted while it is read.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer
from rich.console import Console

from ebb.core.yaml_documents import InputError

LiveOption = Annotated[bool, typer.Option(
    "--live", help="read the cluster itself (the current kubeconfig context) instead of -f files")]
KubeconfigOption = Annotated[str, typer.Option(
    help="with --live: this kubeconfig (default: $KUBECONFIG or ~/.kube/config); implies --live")]
ContextOption = Annotated[str, typer.Option(
    help="with --live: this kubeconfig context (default: the current one); implies --live")]


def wants_live(live: bool, kubeconfig: str, context: str, paths: list[str]) -> bool:
    """Whether the cluster is read live; an InputError when ``-f`` files are given too."""
    live = live or bool(kubeconfig or context)
    if live and paths:
        raise InputError("give either -f FILE (a kubectl dump) or --live (read the cluster), not both")
    return live


def live_documents(kubeconfig: str, context: str) -> list[dict[str, Any]]:
    """The cluster's objects, as a kubectl dump would hold them (trimmed); what was read said on stderr."""
    from ebb.adapters.kube.read import ClusterReadError, read_cluster_from

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
