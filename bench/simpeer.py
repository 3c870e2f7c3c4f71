"""The scheduling simulator beside Karpenter's own ``BenchmarkScheduling`` (``python -m bench simpeer``).

Both sides schedule the same workload: Karpenter v1.14.1's benchmark (``scheduling_benchmark_test.go`` in
``pkg/controllers/provisioning/scheduling``, built with ``-tags=test_performance``) makes its pods with
``makeDiversePods`` from Go's ``math/rand``; ebb's side is ``python -m bench simulator``'s case on
``bench.generators.karpenter_scheduling_workload``, the same generator in Python (the same groups, keys, value sets
and prices; tests/benchmarks/test_karpenter_workload.py checks it against Karpenter's code). The same distributions,
not the same pods: the two random streams differ.

What is timed, per side, for one size: Karpenter's ``ns/op`` of ``BenchmarkScheduling<n>`` at ``-benchtime=1x``,
one ``Scheduler.Solve`` (its ``setupScheduler``, which builds the topology and the scheduler, is before
``b.ResetTimer`` and not timed); ebb's time to build its ``Scheduler`` from the parsed snapshot and place every
pod (the construction is timed). Nodes launched: ``NewNodeClaims`` on Karpenter's side (its ``nodes`` metric),
new nodes on ebb's.

How it runs: the module is copied out of the read-only module cache (``go env GOMODCACHE``) into a temporary
directory and its test binary built once (``go test -c -tags=test_performance``: the binary ``go test
-bench=BenchmarkScheduling -benchtime=1x`` runs, without rebuilding it between runs); then, for every round and
size, ebb's case in a fresh process, then Karpenter's benchmark for that size alone in a fresh process
(``-test.bench=^BenchmarkScheduling<n>$``, so each size's pods start from Karpenter's seed 42 as ebb's start
from its seed). Interleaved, so a change of the machine's speed falls on both sides alike; the ratio is taken
per round (Karpenter's time / ebb's time of the same round) and reported as its range, with the load average
before and after.

Without Go (``PATH`` or /usr/local/go, as deploy/local/lib.sh looks) or the module in its cache the case is
skipped and says why; ``make infra-install`` puts both there. ``EBB_BENCH_SIMPEER_SIZES`` and
``EBB_BENCH_SIMPEER_ROUNDS`` change the sizes and the rounds (the smoke in tests/benchmarks/test_bench_simpeer.py
runs one small size once).
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

KARPENTER_VERSION = "v1.14.1"
MODULE = "sigs.k8s.io/karpenter"
PACKAGE = "pkg/controllers/provisioning/scheduling"
#: the sizes both sides run (Karpenter has BenchmarkScheduling1, 50, 100, 500, 1000, 2000, 5000, 10000, 20000)
SIZES = (100, 1_000, 5_000, 20_000)
ROUNDS = 2
BENCH_SIZES = frozenset((1, 50, 100, 500, 1_000, 2_000, 5_000, 10_000, 20_000))

# BenchmarkScheduling1000-2   	       1	 123456789 ns/op	      8100 nodes ... (metrics in any order)
_BENCH_LINE = re.compile(r"^BenchmarkScheduling(\d+)(?:-\d+)?\s+(\d+)\s+(.*)$", re.MULTILINE)
_METRIC = re.compile(r"([0-9.eE+-]+)\s+(\S+)")


def go_binary() -> str | None:
    """The Go toolchain where deploy/local/lib.sh finds it: ``go`` on the PATH, else /usr/local/go/bin/go."""
    found = shutil.which("go")
    if found:
        return found
    return "/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None


def _go_env() -> dict[str, str]:
    return {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": os.environ.get("GOFLAGS", "") + " -buildvcs=false"}


def karpenter_module(go: str) -> Path | None:
    """Karpenter's module in the Go module cache, or None."""
    out = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, check=False, env=_go_env())
    if out.returncode != 0 or not out.stdout.strip():
        return None
    path = Path(out.stdout.strip()) / f"{MODULE}@{KARPENTER_VERSION}"
    return path if (path / PACKAGE / "scheduling_benchmark_test.go").is_file() else None


def unavailable() -> str | None:
    """Why Karpenter's side cannot run here, or None when it can."""
    go = go_binary()
    if go is None:
        return "Go is not installed (no `go` on the PATH, no /usr/local/go/bin/go); `make infra-install` installs it"
    if karpenter_module(go) is None:
        return (f"{MODULE}@{KARPENTER_VERSION} is not in the Go module cache (`go env GOMODCACHE`); "
                "`make infra-install` downloads it")
    return None


def build_benchmark(workdir: Path) -> Path:
    """Karpenter's scheduling benchmark as a test binary in ``workdir``, built from a writable copy of its module
    there (the module cache is read-only). Go's build cache makes a second build little more than a link."""
    go = go_binary()
    module = karpenter_module(go) if go else None
    if go is None or module is None:
        raise RuntimeError(unavailable() or "Karpenter's benchmark is unavailable")
    copy = workdir / f"karpenter@{KARPENTER_VERSION}"
    shutil.copytree(module, copy, symlinks=True)
    for root, dirs, files in os.walk(copy):
        for name in (*dirs, *files):
            path = Path(root) / name
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    binary = workdir / "scheduling.test"
    build = subprocess.run([go, "test", "-c", "-tags=test_performance", "-o", str(binary), f"./{PACKAGE}"],
                           cwd=copy, capture_output=True, text=True, check=False, env=_go_env())
    if build.returncode != 0:
        raise RuntimeError(f"building Karpenter's benchmark failed: {build.stderr.strip()[-1500:]}")
    return binary


def parse_benchmark(text: str, n: int) -> dict[str, Any]:
    """``BenchmarkScheduling<n>``'s line of ``go test -bench`` output: seconds per Solve (``ns/op``), pods/s and
    the nodes launched (its ``pods/sec`` and ``nodes`` metrics)."""
    for match in _BENCH_LINE.finditer(text):
        if int(match[1]) != n:
            continue
        metrics = {unit: float(value) for value, unit in _METRIC.findall(match[3])}
        if "ns/op" not in metrics or "nodes" not in metrics:
            break
        seconds = metrics["ns/op"] / 1e9
        return {"pods": n, "seconds": seconds, "pods_per_second": metrics.get("pods/sec", n / seconds),
                "nodes": int(metrics["nodes"]), "pods_scheduled": int(metrics.get("pods", n))}
    raise ValueError(f"no BenchmarkScheduling{n} result with ns/op and nodes in:\n{text[-2000:]}")


def run_karpenter(binary: Path, n: int) -> dict[str, Any]:
    """One run of ``BenchmarkScheduling<n>`` at ``-benchtime=1x`` in a fresh process."""
    if n not in BENCH_SIZES:
        raise ValueError(f"Karpenter has no BenchmarkScheduling{n} (sizes {sorted(BENCH_SIZES)})")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([str(binary), "-test.run=XXX", f"-test.bench=^BenchmarkScheduling{n}$",
                          "-test.benchtime=1x"], cwd=binary.parent, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise RuntimeError(f"Karpenter's BenchmarkScheduling{n} failed:\n{(out.stdout + out.stderr)[-3000:]}")
    result = parse_benchmark(out.stdout, n)
    # the whole process's CPU (every thread; its setup and pod generation too, untimed by the benchmark)
    result["cpu_seconds"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result


def _env_ints(name: str, default: Sequence[int]) -> tuple[int, ...]:
    text = os.environ.get(name, "").strip()
    return tuple(int(part.replace("_", "")) for part in text.split(",") if part.strip()) if text else tuple(default)


def run_rounds(ebb_case: Callable[[int], dict[str, Any]], sizes: Sequence[int] | None = None,
               rounds: int | None = None, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every size, ``rounds`` times, ebb then Karpenter (``ebb_case(n)`` runs ebb's side in its own process).
    ``{"skipped": why}`` when Karpenter's side cannot run here."""
    sizes = tuple(sizes or _env_ints("EBB_BENCH_SIMPEER_SIZES", SIZES))
    rounds = rounds or _env_ints("EBB_BENCH_SIMPEER_ROUNDS", (ROUNDS,))[0]
    why = unavailable()
    if why is not None:
        return {"skipped": why}
    load_before = os.getloadavg()
    started = time.perf_counter()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ebb-simpeer-") as tmp:
        try:
            binary = build_benchmark(Path(tmp))
        except RuntimeError as exc:  # its test dependencies could not be downloaded, say: the rest of `all` goes on
            return {"skipped": str(exc)}
        built = time.perf_counter() - started
        log(f"simpeer: Karpenter's benchmark built in {built:.0f}s")
        for round_no in range(1, rounds + 1):
            for n in sizes:
                ebb = ebb_case(n)
                karpenter = run_karpenter(binary, n)
                log(f"simpeer round {round_no}, {n} pods: ebb {ebb['seconds']:.3f}s {ebb['nodes']} nodes, "
                    f"Karpenter {karpenter['seconds']:.3f}s {karpenter['nodes']} nodes, "
                    f"{karpenter['seconds'] / ebb['seconds']:.1f}x; CPU ebb {ebb.get('cpu_seconds', 0):.3f}s, "
                    f"Karpenter {karpenter['cpu_seconds']:.3f}s")
                runs.append({"round": round_no, "pods": n, "ebb": ebb, "karpenter": karpenter})
    return {"karpenter_version": KARPENTER_VERSION, "sizes": list(sizes), "rounds": rounds, "runs": runs,
            "build_seconds": built, "load_before": list(load_before), "load_after": list(os.getloadavg())}


def _span(values: Sequence[float], fmt: str) -> str:
    low, high = min(values), max(values)
    return format(low, fmt) if format(low, fmt) == format(high, fmt) else f"{low:{fmt}} to {high:{fmt}}"


def _cpu(side: dict[str, Any]) -> str:
    return f"{side['cpu_seconds']:.3f}" if "cpu_seconds" in side else "-"


def _cpu_ratio(runs: Sequence[dict[str, Any]]) -> str:
    ratios = [r["karpenter"]["cpu_seconds"] / r["ebb"]["cpu_seconds"] for r in runs
              if r["ebb"].get("cpu_seconds") and "cpu_seconds" in r["karpenter"]]
    return _span(ratios, ".1f") if ratios else "-"


def render(result: dict[str, Any]) -> list[str]:
    """The Results section: per size, each side's seconds per run and nodes launched, the ratio's range."""
    title = "### Scheduling simulator beside Karpenter's BenchmarkScheduling"
    if "skipped" in result:
        return [title, "", f"Skipped: {result['skipped']}.", ""]
    lines = [f"{title} ({result['rounds']} interleaved rounds)", "",
             f"Karpenter {result['karpenter_version']}'s `BenchmarkScheduling<n>` at `-benchtime=1x` (one `Solve`) "
             "and ebb's simulator on the same generated workload, ebb then Karpenter for every size and round. "
             f"Load average (1, 5, 15 min) before {', '.join(f'{x:.1f}' for x in result['load_before'])}, after "
             f"{', '.join(f'{x:.1f}' for x in result['load_after'])}.", "",
             "CPU s: ebb's process time over the timed part; Karpenter's, its whole process's (every thread, its "
             "setup too), so the CPU ratio favours Karpenter a little and moves less with the load than the times.",
             "",
             "| pods | ebb s | Karpenter s | Karpenter s / ebb s | ebb pods/s | Karpenter pods/s | nodes ebb | "
             "nodes Karpenter | CPU s ebb | CPU s Karpenter | CPU ratio |", "|" + "---|" * 11]
    for n in result["sizes"]:
        runs = [r for r in result["runs"] if r["pods"] == n]
        ebb_s = [r["ebb"]["seconds"] for r in runs]
        go_s = [r["karpenter"]["seconds"] for r in runs]
        ratios = [r["karpenter"]["seconds"] / r["ebb"]["seconds"] for r in runs]
        lines.append(
            f"| {n:,} | {', '.join(f'{s:.3f}' for s in ebb_s)} | {', '.join(f'{s:.3f}' for s in go_s)} | "
            f"{_span(ratios, '.1f')} | {_span([n / s for s in ebb_s], ',.0f')} | "
            f"{_span([n / s for s in go_s], ',.0f')} | {_span([r['ebb']['nodes'] for r in runs], ',d')} | "
            f"{_span([r['karpenter']['nodes'] for r in runs], ',d')} | "
            f"{', '.join(_cpu(r['ebb']) for r in runs)} | {', '.join(_cpu(r['karpenter']) for r in runs)} | "
            f"{_cpu_ratio(runs)} |")
    return [*lines, ""]
