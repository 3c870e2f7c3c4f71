"""The `ebb` command: the user's entry point to every mode of ebb. Installed twice: as ``ebb``, and as
``kubectl-ebb``, the kubectl plugin (``kubectl ebb plan ...``; kubectl finds a ``kubectl-*`` program on the PATH),
whose help names itself as kubectl shows it."""

from typing import Annotated

import typer

from ebb_cli.backtest_cmd import backtest
from ebb_cli.common import FlagCommand, FlagGroup
from ebb_cli.db import db_app
from ebb_cli.explain_cmd import explain
from ebb_cli.plan_cmd import plan
from ebb_cli.record_cmd import record
from ebb_cli.run_cmd import run
from ebb_cli.shadow_cmd import shadow_app

app = typer.Typer(help="ebb removes Kubernetes nodes that are no longer worth keeping, safely.",
                  no_args_is_help=True, cls=FlagGroup)
app.add_typer(db_app, name="db")
app.add_typer(shadow_app, name="shadow")


def _print_version(asked: bool) -> None:
    if asked:
        from ebb import __version__

        typer.echo(__version__)
        raise typer.Exit


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", help="Print ebb's version and exit.", is_eager=True,
                                          callback=_print_version)] = False,
) -> None:
    """ebb removes Kubernetes nodes that are no longer worth keeping, safely."""


@app.command(cls=FlagCommand)
def version() -> None:
    """Print ebb's version."""
    _print_version(True)


app.command(name="plan", cls=FlagCommand)(plan)
app.command(name="explain", cls=FlagCommand)(explain)
app.command(name="run", cls=FlagCommand)(run)
app.command(name="backtest", cls=FlagCommand)(backtest)
app.command(name="record", cls=FlagCommand)(record)


def kubectl_plugin() -> None:
    """The ``kubectl-ebb`` program: ``ebb``, its usage lines written as ``kubectl ebb``."""
    app(prog_name="kubectl ebb")
