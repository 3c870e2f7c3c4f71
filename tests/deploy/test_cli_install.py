"""The `ebb` command installs on its own: its wheels, built from this checkout, installed into a clean virtualenv
the way a user installs them, bring a small set of distributions, and the installed command works.

``pip install ebb-cli`` is the dry run (``ebb plan``, ``ebb explain``): the library without its runtime extras
(``ebb-core``), typer and rich, and nothing of Kafka, PostgreSQL, SQLAlchemy, FastAPI, Kubernetes or AWS.
``pip install 'ebb-cli[embedded]'`` adds the embedded mode for ``ebb backtest`` and ``ebb run`` (the planner and the
executor on the in-memory bus and the store in memory), without Kafka, PostgreSQL, SQLAlchemy, FastAPI, Kubernetes
or AWS; ``pip install 'ebb-cli[embedded,sqlite]'`` adds SQLite (SQLAlchemy, aiosqlite,
Alembic) for ``ebb run --database``. A use whose extra is missing exits 2 naming the line that installs it.

The wheels are built with ``uv build`` (one per distribution); third-party distributions come at the versions of
uv.lock (``uv export`` as constraints), from uv's cache when it holds them (``--offline``), else from the index.
Marked ``install``: ``pytest -m install`` runs it alone, ``-m "not install"`` leaves it out.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parents[2]

#: the workspace members the CLI's install and its ``embedded`` extra are made of (the other services are not)
MEMBERS = {"ebb-core": "libs/ebb", "ebb-cli": "apps/cli", "ebb-embedded": "services/embedded",
           "ebb-consolidation-planner": "services/consolidation-planner",
           "ebb-termination-executor": "services/termination-executor"}

#: at most this many distributions in ``pip install ebb-cli`` (ebb-cli and ebb-core included)
MAX_CLI_DISTRIBUTIONS = 25
#: at most this many in ``pip install 'ebb-cli[embedded]'``: the CLI's (21 today) and 16 more, all imported by a
#: back-test but plotly's two (its ``--report``): ebb-embedded and the two services, ebb-core's ``service`` extra
#: (structlog, prometheus-client, pydantic-settings and python-dotenv, tenacity, cloudevents with deprecation and
#: packaging, orjson), jsonpatch with jsonpointer (the simulated cluster's patches), plotly with narwhals
MAX_EMBEDDED_DISTRIBUTIONS = 37

#: the runtime: never in the CLI's own install
RUNTIME = {"aiokafka", "sqlalchemy", "fastapi", "starlette", "uvicorn", "asyncpg", "aiosqlite", "alembic",
           "kubernetes-asyncio", "aiobotocore", "botocore", "plotly"}
#: what the embedded mode runs without: the servers of the distributed mode, the decisions-api's web stack and
#: the SQL store (its decisions are in memory)
NOT_EMBEDDED = {"aiokafka", "fastapi", "starlette", "uvicorn", "asyncpg", "kubernetes-asyncio", "aiobotocore",
                "botocore", "ebb-decisions-api", "sqlalchemy", "aiosqlite", "alembic", "greenlet"}
#: what the ``sqlite`` extra adds for ``ebb run --database``
SQLITE = {"sqlalchemy", "aiosqlite", "alembic"}

NOW = "2026-11-23T18:30:00Z"


def _uv() -> str:
    """uv: the one running these tests (``uv run`` says where in $UV), else the one on the PATH."""
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        pytest.fail("uv is needed to build and install the wheels (make install installs it)")
    return uv


def _python() -> str:
    """The interpreter of the clean virtualenv: Debian's python3.11 where there is one (as the Makefile's)."""
    found = "/usr/bin/python3.11" if os.access("/usr/bin/python3.11", os.X_OK) else shutil.which("python3.11")
    if found is None:
        pytest.fail("no python3.11 to make the virtualenv with")
    return found


def _env() -> dict[str, str]:
    """This process's environment without what points uv or Python at the workspace's own virtualenv."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "PYTHONPATH", "PYTHONHOME", "UV_PYTHON"}}
    return env | {"UV_PYTHON_DOWNLOADS": "never", "NO_COLOR": "1"}


def _run(args: list[str], *, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout, check=False)


def _cached_else_online(args: list[str], *, cwd: Path) -> None:
    """Run a uv command from uv's cache alone (``--offline``), and with the index only if the cache lacks something."""
    done = _run([*args, "--offline"], cwd=cwd)
    if done.returncode != 0:
        done = _run(args, cwd=cwd)
    assert done.returncode == 0, f"{' '.join(args)}:\n{done.stderr}"


class CleanInstall:
    """A virtualenv of its own in ``path``, into which the wheels in ``wheels`` are installed by name."""

    def __init__(self, path: Path, wheels: Path, constraints: Path) -> None:
        self.path, self.wheels, self.constraints = path, wheels, constraints
        done = _run([_uv(), "venv", "--quiet", "--python", _python(), str(path)], cwd=path.parent)
        assert done.returncode == 0, done.stderr

    def wheel(self, distribution: str) -> Path:
        (found,) = self.wheels.glob(f"{distribution.replace('-', '_')}-*.whl")
        return found

    def install(self, requirement: str, extras: str = "", *, members: tuple[str, ...] = ()) -> None:
        """Install ``requirement[extras]`` from its wheel; ``members``, the other workspace distributions it needs,
        are given as wheels too, so that the index (which holds none of them) is asked only for third parties."""
        given = [f"{self.wheel(requirement)}{f'[{extras}]' if extras else ''}",
                 *[str(self.wheel(m)) for m in members]]
        _cached_else_online([_uv(), "pip", "install", "--quiet", "--python", str(self.path / "bin" / "python"),
                             "--constraints", str(self.constraints), *given], cwd=self.path.parent)

    def distributions(self) -> set[str]:
        """The normalized names of every distribution installed in the virtualenv."""
        done = self.run_python("import importlib.metadata as m, json; "
                               "print(json.dumps([d.metadata['Name'] for d in m.distributions()]))")
        return {re.sub(r"[-_.]+", "-", name).lower() for name in json.loads(done.stdout)}

    def run_python(self, code: str) -> subprocess.CompletedProcess[str]:
        done = _run([str(self.path / "bin" / "python"), "-c", code], cwd=self.path.parent)
        assert done.returncode == 0, done.stderr
        return done

    def ebb(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return _run([str(self.path / "bin" / "ebb"), *args], cwd=self.path.parent, timeout=timeout)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One wheel per workspace member the CLI's installs use, built from this checkout."""
    out = tmp_path_factory.mktemp("wheels")
    for source in MEMBERS.values():
        _cached_else_online([_uv(), "build", "--quiet", "--wheel", "--out-dir", str(out), str(ROOT / source)], cwd=ROOT)
    return out


@pytest.fixture(scope="module")
def constraints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """uv.lock's third-party versions, so that the clean install resolves to what the workspace runs (and to what
    uv's cache holds)."""
    done = _run([_uv(), "export", "--frozen", "--quiet", "--no-hashes", "--no-emit-workspace", "--no-dev",
                 "--format", "requirements-txt"], cwd=ROOT)
    assert done.returncode == 0, done.stderr
    path = tmp_path_factory.mktemp("constraints") / "constraints.txt"
    path.write_text(done.stdout)
    return path


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory, wheels: Path, constraints: Path) -> CleanInstall:
    """``pip install ebb-cli`` in a clean virtualenv."""
    venv = CleanInstall(tmp_path_factory.mktemp("cli") / "venv", wheels, constraints)
    venv.install("ebb-cli", members=("ebb-core",))
    return venv


def test_the_cli_alone_is_a_small_install_without_the_runtime(cli: CleanInstall) -> None:
    installed = cli.distributions()
    assert {"ebb-cli", "ebb-core", "typer", "numpy"} <= installed
    assert len(installed) <= MAX_CLI_DISTRIBUTIONS, sorted(installed)
    assert installed & RUNTIME == set()
    assert "ebb" not in installed  # the package index's `ebb` is another project
    # what runs is the wheels' code, not this checkout's
    where = cli.run_python("import ebb, ebb_cli; print(ebb.__file__); print(ebb_cli.__file__)").stdout.split()
    assert all(Path(w).is_relative_to(cli.path) for w in where), where


def test_the_installed_cli_plans_and_explains_an_example(cli: CleanInstall) -> None:
    planned = cli.ebb("plan", "-f", str(ROOT / "examples" / "cluster.yaml"), "--now", NOW, "-o", "json")
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    assert plan["now"] == NOW
    (command,) = [c for c in plan["commands"] if c["method"] == "expiration"]
    assert command["nodes"] and "expired" in command["explanation"]
    blocked = plan["blocked"][0]["node"]

    explained = cli.ebb("explain", blocked, "-f", str(ROOT / "examples" / "cluster.yaml"), "--now", NOW)
    assert explained.returncode == 0, explained.stderr
    assert blocked in explained.stdout


@pytest.mark.parametrize(("args", "extra"), [
    (["backtest", "--trace", "diurnal", "--duration", "1m"], "embedded"),
    (["run", "--duration", "1m"], "embedded"),
    (["plan", "--live"], "live"),
    (["db", "current", "--database-url", "sqlite:///ebb.db"], "db"),
], ids=lambda value: " ".join(value) if isinstance(value, list) else f"[{value}]")
def test_a_use_whose_extra_is_missing_names_the_install_line(cli: CleanInstall, args: list[str], extra: str) -> None:
    done = cli.ebb(*args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"pip install 'ebb-cli[{extra}]'" in done.stderr


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory, wheels: Path, constraints: Path) -> CleanInstall:
    """``pip install 'ebb-cli[embedded]'`` in a clean virtualenv."""
    venv = CleanInstall(tmp_path_factory.mktemp("embedded") / "venv", wheels, constraints)
    venv.install("ebb-cli", "embedded", members=("ebb-core", "ebb-embedded", "ebb-consolidation-planner",
                                                 "ebb-termination-executor"))
    return venv


def test_the_embedded_extra_backtests_without_the_distributed_runtime_or_sqlalchemy(embedded: CleanInstall,
                                                                                     tmp_path: Path) -> None:
    installed = embedded.distributions()
    assert {"ebb-embedded", "ebb-consolidation-planner", "ebb-termination-executor", "plotly"} <= installed
    assert installed & NOT_EMBEDDED == set()
    assert len(installed) <= MAX_EMBEDDED_DISTRIBUTIONS, sorted(installed)

    report = tmp_path / "report.html"
    done = embedded.ebb("backtest", "-f", str(ROOT / "examples" / "karpenter.yaml"), "--trace", "batch-bursts",
                        "--policy", str(ROOT / "examples" / "backtest" / "churn-control.yaml"), "--start", NOW,
                        "--duration", "20m", "--jobs", "1", "-o", "json", "--report", str(report), timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [p["name"] for p in result["policies"]] == ["karpenter-default", "churn-control"]
    assert result["policies"][0]["summary"]["launches"] > 0
    assert "plotly" in report.read_text(encoding="utf-8")


def test_the_embedded_extra_runs_ebb_with_its_decisions_in_memory(embedded: CleanInstall) -> None:
    done = embedded.ebb("run", "--start", NOW, "--duration", "10m", "-o", "json", timeout=600)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["database"] is None and summary["stoppedBecause"] == "duration"


def test_a_database_file_needs_the_sqlite_extra(embedded: CleanInstall, tmp_path: Path) -> None:
    done = embedded.ebb("run", "--database", str(tmp_path / "ebb.db"), "--duration", "1m")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pip install 'ebb-cli[sqlite]'" in done.stderr
    assert not (tmp_path / "ebb.db").exists()


def test_the_sqlite_extra_keeps_the_decisions_in_a_file(tmp_path_factory: pytest.TempPathFactory, wheels: Path,
                                                        constraints: Path, tmp_path: Path) -> None:
    venv = CleanInstall(tmp_path_factory.mktemp("sqlite") / "venv", wheels, constraints)
    venv.install("ebb-cli", "embedded,sqlite", members=("ebb-core", "ebb-embedded", "ebb-consolidation-planner",
                                                        "ebb-termination-executor"))
    installed = venv.distributions()
    assert installed >= SQLITE
    assert installed & (NOT_EMBEDDED - SQLITE - {"greenlet"}) == set()
    database = tmp_path / "ebb.db"
    done = venv.ebb("run", "-f", str(ROOT / "examples" / "cluster.yaml"), "--start", NOW, "--duration", "10m",
                    "--database", str(database), "-o", "json", timeout=600)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["database"] == str(database)
    assert database.read_bytes().startswith(b"SQLite format 3\x00")
