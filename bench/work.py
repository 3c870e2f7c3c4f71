"""`python -m bench work`: the instructions a back-test executes, counted by valgrind, to compare two commits.

A shared virtual machine can change speed by half within an hour, so wall times cannot tell a change of a few percent
from the machine's variation. The count of machine instructions a run executes can: valgrind's cachegrind
(``--cache-sim=no``, so it only counts) runs the program on a synthetic CPU, and the count of the same code and input
varies by a few hundredths of a percent between runs (random message ids, set iteration), whatever else the machine
does. It is a measure of work, not of time (cache misses and branch predictions are not in it), and valgrind runs the
program about 35 times slower, so the run is short: by default one simulated hour of ``batch-bursts`` on the 300-node
example under ``karpenter-default`` (its heaviest hour; about 6 minutes for two commits side by side).

``EBB_BENCH_WORK_BASE=REV`` counts that commit too, side by side (a git worktree of it, its sources first on
``PYTHONPATH``, the same virtualenv: a commit that needs other dependencies cannot be counted this way), and
checks that both runs gave the same JSON. ``EBB_BENCH_WORK_DURATION`` sets the simulated time. Needs ``valgrind``
(Debian's package). Not part of ``make bench``'s ``all``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.backtest import REPO, START

#: cachegrind's total of instructions executed, on its last lines
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def _sources(root: Path) -> str:
    """The source folders of a checkout at ``root``, for ``PYTHONPATH`` (they come before the virtualenv's)."""
    folders = [root / "libs/ebb/src", root / "apps/cli/src", *sorted((root / "services").glob("*/src"))]
    return os.pathsep.join(str(f) for f in folders)


def _compile(root: Path) -> None:
    """Compile the sources of the checkout at ``root``. With PYTHONDONTWRITEBYTECODE set (this machine) a module
    without up-to-date bytecode is compiled again by every run, and counted: about 0.9 billion instructions for a
    fresh worktree's modules, enough to hide a change of a few percent."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", *_sources(root).split(os.pathsep)],
                   capture_output=True, check=True)


def _start(duration: str, sources: str, out: Path) -> subprocess.Popen[bytes]:
    ebb = Path(sys.executable).parent / "ebb"
    args = ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}.cg",
            sys.executable, str(ebb), "backtest", "-f", str(REPO / "examples/cluster.yaml"), "--start", START,
            "--trace", "batch-bursts", "--duration", duration, "-o", "json"]
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": sources}
    with open(f"{out}.json", "wb") as stdout, open(f"{out}.err", "wb") as stderr:
        return subprocess.Popen(args, stdout=stdout, stderr=stderr, env=env)


def _result(process: subprocess.Popen[bytes], out: Path) -> tuple[int, bytes]:
    """The instructions counted and the run's JSON, once it ended."""
    process.wait()
    err = Path(f"{out}.err").read_text(errors="replace")
    found = _REFS.findall(err)
    if process.returncode != 0 or not found:
        raise SystemExit(f"the counted back-test failed (exit {process.returncode}):\n{err[-3000:]}")
    return int(found[-1].replace(",", "")), Path(f"{out}.json").read_bytes()


def case_work() -> dict[str, Any]:
    if shutil.which("valgrind") is None:
        raise SystemExit("bench work needs valgrind (apt-get install valgrind)")
    duration = os.environ.get("EBB_BENCH_WORK_DURATION", "1h")
    base = os.environ.get("EBB_BENCH_WORK_BASE")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, check=True).stdout.strip())
    with tempfile.TemporaryDirectory(prefix="ebb-bench-work-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        label = f"the checkout{' (with uncommitted changes)' if dirty else ''}"
        print(f"work: the checkout is {head}{' with uncommitted changes' if dirty else ''}", file=sys.stderr)
        # the checkout's sources on PYTHONPATH too, so that both runs have the same shape of sys.path; compiled
        # first, as the base's are below: a module edited since `make install` would be compiled again by the run
        _compile(REPO)
        runs = {label: (_start(duration, _sources(REPO), folder / "head"), folder / "head")}
        worktree = folder / "base"
        if base:
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(worktree), base],
                           capture_output=True, text=True, check=True)
            _compile(worktree)
            runs[base] = (_start(duration, _sources(worktree), folder / "base-run"), folder / "base-run")
        try:
            counted = {name: _result(process, out) for name, (process, out) in runs.items()}
        finally:
            for process, _ in runs.values():
                if process.poll() is None:
                    process.kill()
            if base:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(worktree)],
                               capture_output=True, check=False)
        wall = time.perf_counter() - started
    outputs = {output for _, output in counted.values()}
    return {"duration": duration, "wall_seconds": wall,
            "runs": [{"code": name, "instructions": n} for name, (n, _) in counted.items()],
            "same_json": len(outputs) == 1}


def render(r: dict[str, Any]) -> list[str]:
    lines = [f"### Work: instructions of a {r['duration']} back-test (`batch-bursts`, the 300-node example, "
             "karpenter-default)", "",
             f"Counted by valgrind's cachegrind in {r['wall_seconds']:.0f} s wall; within a few hundredths of a "
             "percent on every run of the same code, whatever the machine's speed.", "",
             "| code | instructions |", "|---|---:|"]
    runs = r["runs"]
    lines += [f"| {run['code']} | {run['instructions']:,} |" for run in runs]
    if len(runs) == 2:
        new, old = runs[0]["instructions"], runs[1]["instructions"]
        lines += ["", f"{runs[0]['code']} executes {(new - old) / old:+.1%} of {runs[1]['code']}'s instructions; "
                      f"the two runs' JSON is {'the same' if r['same_json'] else 'DIFFERENT'}."]
    return [*lines, ""]
