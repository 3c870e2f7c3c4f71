"""Helm for the tests of charts/ebb: the binary deploy/local/helm.sh builds from the Go module proxy and caches
(``~/.cache/ebb/helm-<version>``, as the other deploy/local tools), and the chart rendered into documents.

The binary is built on first use when the cache has none (a few minutes on 2 cores; CI builds it before the tests,
.ci/run), as the integration fixtures start the servers they need: nothing is skipped."""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "ebb"
HELM_SH = REPO / "deploy" / "local" / "helm.sh"


@functools.cache
def helm_binary() -> Path:
    """The cached Helm binary (built first when missing)."""
    done = subprocess.run([str(HELM_SH), "path"], capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"deploy/local/helm.sh path failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    path = Path(done.stdout.strip().splitlines()[-1])
    assert path.is_file(), path
    return path


def helm(*args: str, kubeconfig: str | Path | None = None, timeout: float = 600,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``helm ARGS`` (with ``--kubeconfig`` when given); a failure raises with Helm's stderr."""
    command = [str(helm_binary()), *args]
    if kubeconfig is not None:
        command += ["--kubeconfig", str(kubeconfig)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)}: exit {done.returncode}\n{done.stderr[-4000:]}")
    return done


def values_file(values: Mapping[str, Any], directory: Path, name: str = "values.yaml") -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump(dict(values), sort_keys=False))
    return path


def render(*, release: str = "ebb", namespace: str = "ebb-system", value_files: Iterable[Path] = (),
           sets: Iterable[str] = (), include_crds: bool = False) -> list[dict[str, Any]]:
    """``helm template`` of charts/ebb, as documents."""
    args = ["template", release, str(CHART), "--namespace", namespace]
    for path in value_files:
        args += ["--values", str(path)]
    for assignment in sets:
        args += ["--set", assignment]
    if include_crds:
        args.append("--include-crds")
    return [doc for doc in yaml.safe_load_all(helm(*args).stdout) if doc]


def of_kind(docs: Iterable[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """The documents of ``kind`` by name."""
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}
