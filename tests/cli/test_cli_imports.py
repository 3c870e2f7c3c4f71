"""`ebb --help` and each command's `--help` answer without importing the engine, the embedded mode or an I/O
library: the command modules import those when they run (ebb_cli.common says why). Each case runs in a fresh
interpreter, so what the help imported is all that is in ``sys.modules``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: what a help text must not cost: the engine (numpy under it), the embedded mode, and the services' I/O libraries
HEAVY = ("numpy", "ebb.core.model", "ebb.core.engine", "ebb_embedded", "sqlalchemy", "fastapi", "aiokafka",
         "kubernetes_asyncio", "aiobotocore", "plotly", "asyncio")

PROBE = """
import json, sys
from typer.testing import CliRunner
from ebb_cli.main import app
result = CliRunner().invoke(app, json.loads(sys.argv[1]))
print(json.dumps({"exit": result.exit_code, "output": result.output,
                  "heavy": [m for m in json.loads(sys.argv[2]) if m in sys.modules]}))
"""


@pytest.mark.parametrize("args", [["--help"], ["plan", "--help"], ["explain", "--help"], ["run", "--help"],
                                  ["backtest", "--help"], ["record", "--help"], ["db", "--help"],
                                  ["db", "upgrade", "--help"]],
                         ids=" ".join)
def test_help_imports_nothing_heavy(args: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args), json.dumps(HEAVY)], capture_output=True,
                          text=True, timeout=120, check=True)
    answer = json.loads(done.stdout)
    assert answer["exit"] == 0, answer["output"]
    assert "Usage:" in answer["output"]
    assert answer["heavy"] == []


def test_the_probe_sees_what_a_command_imports() -> None:
    """The check above can fail: a command that runs imports the engine, and the probe says so."""
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(["plan", "-f", "/nonexistent.yaml"]),
                           json.dumps(HEAVY)], capture_output=True, text=True, timeout=120, check=True)
    answer = json.loads(done.stdout)
    assert answer["exit"] == 2
    assert "ebb.core.model" in answer["heavy"]
