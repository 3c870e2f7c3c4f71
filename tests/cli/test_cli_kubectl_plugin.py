"""`kubectl ebb` (docs/cli.md): the ``kubectl-ebb`` program installed next to ``ebb`` is a plugin that
``kubectl plugin list`` finds, and ``kubectl ebb ...`` runs ebb's commands, its usage written as kubectl shows it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
KUBECTL = shutil.which("kubectl")

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def _kubectl(*args: str) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1",
           "COLUMNS": "100"}
    return subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=120, check=False,
                          cwd=REPO)


def test_kubectl_plugin_list_finds_it() -> None:
    assert (BIN / "kubectl-ebb").is_file()
    done = _kubectl("plugin", "list")
    assert str(BIN / "kubectl-ebb") in done.stdout, done.stdout + done.stderr


def test_kubectl_ebb_runs_ebb() -> None:
    helped = _kubectl("ebb", "plan", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "Usage: kubectl ebb plan [OPTIONS]" in helped.stdout
    args = ["-f", "examples/karpenter.yaml", "--now", "2026-11-23T18:30:00Z", "-o", "json"]
    through_kubectl = _kubectl("ebb", "plan", *args)
    assert through_kubectl.returncode == 0, through_kubectl.stderr
    direct = subprocess.run([str(BIN / "ebb"), "plan", *args], capture_output=True, text=True, timeout=120,
                            check=True, cwd=REPO)
    assert json.loads(through_kubectl.stdout) == json.loads(direct.stdout)
