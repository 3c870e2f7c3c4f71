"""`ebb run`'s words around the run: the closing line (what the run changed, a trace may grow the cluster); the
``--database`` file and the ``--api-port`` refused before the run when they cannot serve; and `ebb --version`."""

from __future__ import annotations

import socket
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ebb_cli.main import app
from ebb_cli.run_cmd import SQLITE_HEADER, _change_line, _database_problem, _port_problem
from ebb_embedded.status import Status
from tests.kit.builders import NOW


def status(nodes: int, cost: float) -> Status:
    return Status(now=NOW, elapsed=timedelta(0), nodes=nodes, pods=0, pending_pods=0, cost_per_hour=cost)


@pytest.mark.parametrize(("start", "end", "line"), [
    ((10, 5.0), (7, 3.5), "saved $1.50/h (3 nodes removed)"),
    ((10, 5.0), (9, 4.0), "saved $1.00/h (1 node removed)"),
    ((10, 5.0), (10, 5.0), "saved $0.00/h (0 nodes removed)"),
    ((2, 1.0), (14, 7.25), "cost $6.25/h more (12 nodes added)"),
    ((2, 1.0), (3, 1.5), "cost $0.50/h more (1 node added)"),
    ((300, 2000.0), (80, 49.96), "saved $1,950.04/h (220 nodes removed)"),
])
def test_the_closing_line_says_what_the_run_changed(start: tuple[int, float], end: tuple[int, float],
                                                    line: str) -> None:
    assert _change_line(status(*start), status(*end)) == line


@pytest.mark.parametrize(("content", "problem"), [
    (None, None),  # made by the run
    (b"", None),  # an empty file: SQLite makes its database there
    (SQLITE_HEADER + b"\x10\x00", None),
    (b"hello\n", "is not a SQLite database"),
])
def test_the_database_file(tmp_path: Path, content: bytes | None, problem: str | None) -> None:
    path = tmp_path / "ebb.sqlite"
    if content is not None:
        path.write_bytes(content)
    assert _database_problem(path) == problem
    assert _database_problem(tmp_path) == "is a directory"


def test_a_database_that_is_no_sqlite_file_is_refused_before_the_run(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n")
    result = CliRunner().invoke(app, ["run", "--duration", "1m", "--database", str(notes)])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.replace("│", " ").split())
    assert "Invalid value for --database:" in said and "is not a SQLite database" in said
    assert "Traceback" not in result.output and notes.read_text() == "not a database\n"


def test_an_api_port_in_use_is_refused_before_the_run() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert _port_problem(port) == "cannot be listened on: Address already in use"
        result = CliRunner().invoke(app, ["run", "--duration", "1m", "--api-port", str(port)])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.replace("│", " ").split())
    assert f"Invalid value for --api-port: 127.0.0.1:{port} cannot be listened on: Address already in use" in said
    assert _port_problem(port) is None  # free again


@pytest.mark.parametrize("args", [["--version"], ["version"]])
def test_the_version(args: list[str]) -> None:
    from ebb import __version__

    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{__version__}\n"
