"""Back-testing: the same workload trace under each disruption policy, measured side by side.

A **policy** is a set of ``ebb.sh/v1`` documents: ``DisruptionPolicy`` (the disruption settings of the NodePool
it is named after: consolidationPolicy, consolidateAfter, budgets, expireAfter, stabilizationWindow,
demandWindow; named ``"*"``, it applies to every NodePool of the cluster) and ``Hold``. Running a policy replaces
the cluster's own DisruptionPolicies and Holds with the policy's. ``karpenter-default`` (``WhenEmptyOrUnderutilized``,
``consolidateAfter: 0s``, no stabilization window, Karpenter's default budget) is built in, the baseline, and so
is ``karpenter-balanced`` (the same under ``consolidationPolicy: Balanced``): ebb's simulations of the real
Karpenter's settings, checked against it by ``python -m bench calibrate`` (docs/backtest.md).

``run_backtest`` runs the embedded mode (``ebb_embedded.runner``) once per policy on a ``WorkloadCluster``
(``ebb_embedded.workload``) from the same documents, start, duration and seed, with three more tasks: the
trace's events applied at their times, the provisioner (``ebb_embedded.provisioner``) and a sampler. Every run
is in virtual time, so the result is deterministic (the same input gives the same JSON), and the policies
differ only by what the policies do. The result is a JSON-able dict (the shape ``ebb_cli.report`` renders):
per policy a summary (node-hours cost, peak and mean nodes, launches, disruption decisions by method,
evictions, pods evicted more than once, pending time p50/p95, the cost of churn), a series sampled every
``sample_every`` simulated seconds, and the decisions that saved the most with the planner's explanations.

``run_backtests`` runs several seeds' comparisons, each (seed, policy) run in a worker process of its own when
``jobs`` > 1: the runs share nothing, so spreading them over the machine's cores changes how long a back-test
takes, never its result.

One seed is one draw of the trace (where its bursts fall, how big they are), and how a policy compares can turn
on it; ``across_seeds`` sums up the runs of several seeds: each figure's mean, minimum and maximum per policy,
and per seed how far each policy's churn and cost are from the baseline's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import multiprocessing
import pickle
import queue
import signal
import threading
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

import structlog

from ebb.adapters.clock import Clock, SimClock, until_any
from ebb.core.decision import DISRUPTING
from ebb.core.traces import Trace
from ebb_embedded import BACKTEST_WORKER_MODULES
from ebb_embedded.status import Status

if TYPE_CHECKING:  # imported where a run starts (`run_policy`, `workload_tasks`): see `BACKTEST_WORKER_MODULES`
    from ebb_embedded.cluster import SimulatedCluster
    from ebb_embedded.runner import MoreTasks
    from ebb_embedded.workload import WorkloadCluster

log = structlog.get_logger("ebb_embedded.backtest")

#: the kinds a policy is made of
POLICY_KINDS = ("DisruptionPolicy", "Hold")
#: a DisruptionPolicy of this name applies to every NodePool
EVERY_NODEPOOL = "*"
KARPENTER_DEFAULT = "karpenter-default"
KARPENTER_BALANCED = "karpenter-balanced"


class PolicyError(ValueError):
    """A policy file that is not a policy."""


@dataclass(frozen=True)
class Policy:
    name: str
    #: the policy's YAML text, or "built in"
    source: str
    documents: tuple[Mapping[str, Any], ...]
    #: engine options the run's planner takes (``ebb.core.options`` keys): the simulations of Karpenter consolidate
    #: at its pace (``karpenterPace``)
    engine_options: Mapping[str, str] | None = None


def _karpenter(name: str, consolidation_policy: str) -> Policy:
    doc = {"apiVersion": "ebb.sh/v1", "kind": "DisruptionPolicy", "metadata": {"name": EVERY_NODEPOOL},
           "spec": {"consolidationPolicy": consolidation_policy, "consolidateAfter": "0s",
                    "minimumSavingPerEvictedPod": 0, "budgets": [{"nodes": "10%"}]}}
    return Policy(name, "built in", (doc,), {"karpenterPace": "true"})


def karpenter_default() -> Policy:
    """Karpenter's defaults: consolidate empty and underutilized nodes at once, no stabilization window, any saving
    worth any evictions."""
    return _karpenter(KARPENTER_DEFAULT, "WhenEmptyOrUnderutilized")


def karpenter_balanced() -> Policy:
    """Karpenter's defaults under ``consolidationPolicy: Balanced`` (``ebb.core.balanced``): a consolidation only
    when the share of its NodePool's cost it saves is at least half the share of the disruption cost it causes."""
    return _karpenter(KARPENTER_BALANCED, "Balanced")


#: the built-in policies by name
BUILTIN_POLICIES: dict[str, Callable[[], Policy]] = {KARPENTER_DEFAULT: karpenter_default,
                                                     KARPENTER_BALANCED: karpenter_balanced}


def policy_of(name: str, text: str, documents: Iterable[Any]) -> Policy:
    """A policy from the documents of a file (``text`` is kept to show it); PolicyError names what is wrong. Besides
    its DisruptionPolicies and Holds, a file may hold the ConfigMap ``ebb-engine-options`` (``ebb.core.options``):
    the engine options the run's planner takes, as the deployed planner takes that object (``maxReplacements``,
    ``spotToSpot``)."""
    from ebb.core.options import CONFIGMAP_NAME, EngineOptionsError, data_of, parse_engine_options

    docs: list[Mapping[str, Any]] = []
    engine_options: dict[str, str] | None = None
    for i, doc in enumerate(documents, 1):
        if not isinstance(doc, Mapping):
            raise PolicyError(f"policy {name}: document {i} is not an object")
        kind, api = doc.get("kind"), str(doc.get("apiVersion", ""))
        if kind == "ConfigMap" and api == "v1" and (doc.get("metadata") or {}).get("name") == CONFIGMAP_NAME:
            try:
                parse_engine_options(data := data_of(doc))
            except EngineOptionsError as e:
                raise PolicyError(f"policy {name}: document {i}: {e}") from e
            engine_options = {str(k): str(v) for k, v in data.items()}
            continue
        if kind not in POLICY_KINDS or not api.startswith("ebb.sh/"):
            raise PolicyError(f"policy {name}: document {i} is a {api or '?'} {kind or '?'}; a policy holds only "
                              f"ebb.sh/v1 {' and '.join(POLICY_KINDS)} documents, and the v1 ConfigMap "
                              f"{CONFIGMAP_NAME}")
        if not (doc.get("metadata") or {}).get("name"):
            raise PolicyError(f"policy {name}: document {i} ({kind}) has no metadata.name")
        docs.append(doc)
    if not docs:
        raise PolicyError(f"policy {name}: no DisruptionPolicy or Hold in it")
    return Policy(name, text, tuple(docs), engine_options)


def apply_policy(documents: Sequence[Mapping[str, Any]], policy: Policy) -> list[dict[str, Any]]:
    """The cluster's documents with the policy's DisruptionPolicies and Holds instead of its own. Documents are
    shared, not copied (the simulated cluster copies every document it takes in); a ``"*"`` DisruptionPolicy's
    copy for each NodePool has a metadata of its own."""
    out = [dict(d) for d in documents if d.get("kind") not in POLICY_KINDS]
    pools = [str((d.get("metadata") or {}).get("name")) for d in out if d.get("kind") == "NodePool"]
    for doc in policy.documents:
        name = (doc.get("metadata") or {}).get("name")
        if doc.get("kind") == "DisruptionPolicy" and name == EVERY_NODEPOOL:
            named = {n for p in policy.documents if p.get("kind") == "DisruptionPolicy"
                     for n in [(p.get("metadata") or {}).get("name")]}
            for pool in pools:
                if pool not in named:  # one named after the pool wins over "*"
                    out.append({**doc, "metadata": {**(doc.get("metadata") or {}), "name": pool}})
        else:
            out.append(dict(doc))
    return out


@dataclass(frozen=True)
class BacktestOptions:
    start: datetime
    duration: timedelta
    seed: int = 0
    #: the series' sampling interval (simulated seconds)
    sample_every: float = 300.0
    spot_to_spot: bool = False
    #: ``EmbeddedOptions.reuse_passes`` (the result is the same either way)
    reuse_passes: bool = True
    #: seconds from a launch to the node being Ready (``SimulatedCluster.boot_seconds``): a cloud's start-up
    #: time; the calibration sets it from the real run it is compared with
    boot_seconds: float = 60.0
    #: with it, a time drawn per node between ``boot_seconds`` and this (a cloud's spread, e.g. 30-90 s)
    boot_seconds_max: float | None = None
    #: with them, each node's time is one of these, drawn per node: the start-up times a cloud was measured to take
    #: (the calibration gives the real run's, whose few slow outliers a uniform range would make as likely as the rest)
    boot_samples: tuple[float, ...] = ()
    #: each policy's entry keeps this many of its disrupting decisions that saved the most, with their
    #: explanations (``decisions``: what the report shows)
    top_decisions: int = 5
    #: how the simulated kube-scheduler picks a node (``ebb_embedded.cluster.BINDINGS``): ``scored``, as
    #: kube-scheduler's default profile, or ``first-fit``
    binding: str = "scored"
    #: the store of each run (``EmbeddedOptions.store``): in memory, or a temporary SQLite database; the result is
    #: the same either way
    store: Literal["memory", "sqlite"] = "memory"


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


async def _drive(cluster: WorkloadCluster, clock: SimClock, stop: asyncio.Event, trace: Trace,
                 errors: list[str]) -> None:
    """Apply the trace's events at their times, then wait for the end."""
    for event in trace.ordered():
        wait = event.at - clock.elapsed().total_seconds()
        if wait > 0 and await clock.sleep(wait, stop):
            return
        try:
            await cluster.apply(event)
        except ValueError as exc:  # an event the cluster cannot apply (named): the run goes on without it
            errors.append(f"at {event.at:g}s: {exc}")
            log.warning("trace event not applied", at=event.at, error=str(exc))
    await until_any(stop)


def _live_cost(cluster: WorkloadCluster) -> tuple[int, float]:
    lives = [life for life in cluster.measures.nodes.values() if life.end is None]
    return len(lives), sum(life.price for life in lives)


async def _sample(cluster: WorkloadCluster, clock: Clock, stop: asyncio.Event, every: float,
                  series: list[dict[str, Any]]) -> None:
    """Every ``every`` seconds: the cost per hour, nodes, Pending pods, and the disruptions and launches since
    the last sample."""
    deleted = launched = 0
    while True:
        nodes, cost = _live_cost(cluster)
        now_deleted, now_launched = cluster.nodes_deleted, sum(cluster.measures.launches.values())
        series.append({"t": _iso(clock()), "cost_per_hour": round(cost, 4), "nodes": nodes,
                       "pending_pods": cluster.pending_count(),
                       "disruptions": now_deleted - deleted, "launches": now_launched - launched})
        deleted, launched = now_deleted, now_launched
        if await clock.sleep(every, stop):
            return


def _summary(cluster: WorkloadCluster, end: Status, finished: datetime, duration: float) -> dict[str, Any]:
    m = cluster.measures
    node_seconds = cost = churn = 0.0
    for name, life in m.nodes.items():
        lived = ((life.end or finished) - life.start).total_seconds()
        node_seconds += lived
        cost += life.price * lived / 3600
        if life.launched:
            churn += life.price * min(lived, cluster.boot_time(name)) / 3600
    pending = [*m.pending_seconds, *((finished - since).total_seconds() for since in m.pending_since.values())]
    disruptions: dict[str, int] = {}
    for (state, method), n in sorted(end.decisions.items()):
        if state in DISRUPTING:
            disruptions[method] = disruptions.get(method, 0) + n
    return {
        "node_hours_cost": round(cost, 4), "peak_nodes": m.peak_nodes,
        "mean_nodes": round(node_seconds / duration, 3) if duration else 0.0,
        "launches": sum(m.launches.values()), "launches_by": dict(sorted(m.launches.items())),
        "disruptions": disruptions, "nodes_disrupted": cluster.nodes_deleted,
        "evictions": cluster.evictions, "evictions_refused": cluster.evictions_refused,
        "pods_evicted_more_than_once": sum(1 for n in m.evicted.values() if n > 1),
        "interruptions": m.interruptions, "pods_lost": m.pods_lost,
        "pending_seconds_p50": round(_percentile(pending, 0.5), 3),
        "pending_seconds_p95": round(_percentile(pending, 0.95), 3),
        "pending_pods_at_end": len(m.pending_since),
        "pending_pod_seconds": round(sum(pending), 3),
        "churn_cost": round(churn, 4),
        "decisions": {f"{method}/{state}": n for (state, method), n in sorted(end.decisions.items())},
        "planner_passes": end.passes,
        "planner_passes_reused": end.passes_reused,
    }


def workload_tasks(trace: Trace, *, errors: list[str], made: list[WorkloadCluster] | None = None,
                   series: list[dict[str, Any]] | None = None, sample_every: float = 300.0) -> MoreTasks:
    """The tasks that run next to the services on a ``WorkloadCluster`` (``run_embedded``'s ``more_tasks``):
    the trace (events it could not apply go to ``errors``), the provisioner and, given ``series``, the
    sampler; ``made`` receives the cluster."""
    from ebb_embedded.provisioner import run_provisioner
    from ebb_embedded.workload import WorkloadCluster

    def more_tasks(cluster: SimulatedCluster, clock: SimClock, stop: asyncio.Event, prices: Mapping[str, float],
                   seed: int) -> Iterable[tuple[str, Coroutine[Any, Any, None]]]:
        if not isinstance(cluster, WorkloadCluster):
            raise TypeError("a trace runs on a WorkloadCluster (run_embedded's cluster_factory)")
        if made is not None:
            made.append(cluster)
        cluster.start_measuring(prices)
        tasks = [("trace", _drive(cluster, clock, stop, trace, errors)),
                 ("provisioner", run_provisioner(cluster, clock, stop, seed=seed))]
        if any(event.interrupt is not None for event in trace.events):
            tasks.append(("cloud", cluster.run_cloud(stop)))  # only then: a task more changes no other run
        if series is not None:
            tasks.append(("sampler", _sample(cluster, clock, stop, sample_every, series)))
        return tasks

    return more_tasks


def run_policy(documents: Sequence[Mapping[str, Any]], trace: Trace, policy: Policy, options: BacktestOptions,
               *, report: Callable[[Status], None] | None = None) -> dict[str, Any]:
    """One policy's run of the trace: its entry of the result (name, source, summary, series, and the
    ``top_decisions`` that saved the most with their explanations)."""
    import json
    import tempfile
    from pathlib import Path

    from ebb_embedded.runner import EmbeddedOptions

    with tempfile.TemporaryDirectory(prefix="ebb-backtest-") as scratch:
        engine_options = None
        if policy.engine_options:  # the planner reads its options from a file (a mapping of keys: YAML)
            engine_options = Path(scratch) / "engine-options.yaml"
            engine_options.write_text(json.dumps(dict(policy.engine_options)))
        embedded = EmbeddedOptions(start=options.start, duration=options.duration, seed=options.seed,
                                   spot_to_spot=options.spot_to_spot, report_every=0.2,
                                   cluster=f"backtest-{policy.name}"[:63], reuse_passes=options.reuse_passes,
                                   explain=False,  # nothing in a back-test reads why nodes are left alone
                                   engine_options=engine_options, top_decisions=options.top_decisions,
                                   store=options.store)
        return _run_policy(documents, trace, policy, options, embedded=embedded, report=report)


def _run_policy(documents: Sequence[Mapping[str, Any]], trace: Trace, policy: Policy, options: BacktestOptions, *,
                embedded: Any, report: Callable[[Status], None] | None) -> dict[str, Any]:
    """``run_policy`` with the run's embedded options made."""
    from ebb_embedded.runner import run_embedded, simulation_runner
    from ebb_embedded.workload import WorkloadCluster

    series: list[dict[str, Any]] = []
    errors: list[str] = []
    made: list[WorkloadCluster] = []
    more_tasks = workload_tasks(trace, errors=errors, made=made, series=series, sample_every=options.sample_every)

    def cluster_factory(*args: Any, **kwargs: Any) -> WorkloadCluster:
        return WorkloadCluster(*args, boot_seconds=options.boot_seconds, boot_seconds_max=options.boot_seconds_max,
                               boot_samples=options.boot_samples, binding=options.binding, **kwargs)

    with simulation_runner(embedded) as runner:
        summary = runner.run(run_embedded(apply_policy(documents, policy), embedded, asyncio.Event(),
                                          report=report, cluster_factory=cluster_factory, more_tasks=more_tasks))
    cluster = made[0]
    result = _summary(cluster, summary.end, summary.end.now, options.duration.total_seconds())
    return {"name": policy.name, "source": policy.source, "summary": result, "series": series,
            "trace_errors": errors, "decisions": summary.top_decisions}


#: the figures ``across_seeds`` sums up: a summary's own, and churn (launches + disruption decisions)
SPREAD_FIGURES = ("node_hours_cost", "launches", "disruptions", "churn", "evictions", "pods_evicted_more_than_once")


def _figures(summary: Mapping[str, Any]) -> dict[str, float]:
    disruptions = sum(summary["disruptions"].values())
    return {"node_hours_cost": summary["node_hours_cost"], "launches": summary["launches"],
            "disruptions": disruptions, "churn": summary["launches"] + disruptions,
            "evictions": summary["evictions"], "pods_evicted_more_than_once": summary["pods_evicted_more_than_once"]}


def _spread(values: Sequence[float | None]) -> dict[str, float] | None:
    """Mean, min and max of the values that are numbers (None: none is)."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    return {"mean": round(sum(known) / len(known), 4), "min": min(known), "max": max(known)}


def _change(value: float, baseline: float) -> float | None:
    """``value`` against ``baseline`` in percent (0 when both are 0; None, no ratio, when only the baseline is)."""
    if not baseline:
        return 0.0 if not value else None
    return round(100 * (value / baseline - 1), 2)


def across_seeds(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The runs of one comparison under several seeds (``run_backtest``'s results, the same policies in the same
    order), summed up per policy: each of ``SPREAD_FIGURES``' mean, min and max over the seeds, and, for every
    policy after the first (the baseline), its churn and cost against the baseline's in percent, per seed and
    their spread."""
    if not results:
        raise ValueError("no runs to sum up")
    names = [run["name"] for run in results[0]["policies"]]
    if any([run["name"] for run in result["policies"]] != names for result in results):
        raise ValueError("the runs do not compare the same policies")
    policies: dict[str, Any] = {}
    for i, name in enumerate(names):
        mine = [_figures(result["policies"][i]["summary"]) for result in results]
        entry: dict[str, Any] = {figure: _spread([f[figure] for f in mine]) for figure in SPREAD_FIGURES}
        if i:
            base = [_figures(result["policies"][0]["summary"]) for result in results]
            churn = [_change(f["churn"], b["churn"]) for f, b in zip(mine, base, strict=True)]
            cost = [_change(f["node_hours_cost"], b["node_hours_cost"]) for f, b in zip(mine, base, strict=True)]
            entry["against_baseline"] = {"churn_percent": churn, "cost_percent": cost,
                                         "churn_percent_spread": _spread(churn), "cost_percent_spread": _spread(cost)}
        policies[name] = entry
    return {"seeds": [result["seed"] for result in results], "baseline": names[0], "policies": policies}


def run_backtest(documents: Sequence[Mapping[str, Any]], trace: Trace, policies: Sequence[Policy],
                 options: BacktestOptions, *,
                 report: Callable[[Policy, Status], None] | None = None) -> dict[str, Any]:
    """Every policy's run of ``trace`` on ``documents``, side by side (JSON-able; see the module)."""
    runs = []
    for policy in policies:
        def progress(status: Status, policy: Policy = policy) -> None:
            if report is not None:
                report(policy, status)

        runs.append(run_policy(documents, trace, policy, options, report=progress))
    return _comparison(trace, options, runs)


def _comparison(trace: Trace, options: BacktestOptions, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """``run_backtest``'s result from its policies' runs."""
    return {"trace": trace.name, "start": _iso(options.start), "duration_seconds": options.duration.total_seconds(),
            "seed": options.seed, "policies": runs}


#: a worker process's queue of (run index, status) for the parent's progress display (set by `_worker_start`)
_progress: Any = None


def _worker_start(progress: Any, log_level: str) -> None:
    """A worker process's start: the queue its runs report progress on, and the services' logs as the parent's."""
    from ebb.adapters.logs import configure

    global _progress  # noqa: PLW0603 - one per worker process, set once at its start
    _progress = progress
    configure(log_level)


def _worker_run(index: int, documents: Sequence[Mapping[str, Any]], trace: Trace, policy: Policy,
                options: BacktestOptions) -> dict[str, Any]:
    """One run in a worker process, its progress put on the worker's queue."""
    def report(status: Status) -> None:
        if _progress is not None:
            _progress.put((index, status))

    try:
        return run_policy(documents, trace, policy, options, report=report)
    except Exception as exc:
        try:
            pickle.dumps(exc)
        except Exception:  # an error that cannot cross to the parent would break the pool instead: its text does
            raise RuntimeError(f"the run of policy {policy.name} failed: {type(exc).__name__}: {exc}") from None
        raise


def _stop_workers(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the worker processes now (a run left going could take hours)."""
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14
    if terminate is not None:
        terminate()
        return
    # before 3.14 the pool has no way to: its processes (which shutdown forgets), each sent SIGTERM, and its manager
    # thread (which shutdown forgets too) let finish: at exit Python wakes each pool's manager through a pipe that
    # thread closes as it ends, and a close racing the wake-up printed "OSError: [Errno 9] Bad file descriptor"
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    if manager is not None:
        manager.join(timeout=10)


def run_backtests(documents: Sequence[Mapping[str, Any]], runs: Sequence[tuple[Trace, BacktestOptions]],
                  policies: Sequence[Policy], *, jobs: int = 1,
                  report: Callable[[int, Policy, Status], None] | None = None,
                  log_level: str = "error") -> list[dict[str, Any]]:
    """``run_backtest`` of each (trace, options) in ``runs`` (one per seed), in that order. With ``jobs`` > 1,
    the (seed, policy) runs go to that many worker processes (forked from a server that imported this module
    once), and the result is the same as with one: each run depends only on its input. ``report`` gets
    ``(index of the seed's run, policy, status)`` as each run goes, from this process; ``log_level`` configures
    the workers' logs. A run that fails stops the others and raises its error here."""
    pairs = [(i, p) for i in range(len(runs)) for p in range(len(policies))]
    jobs = max(1, min(jobs, len(pairs)))
    if jobs == 1:
        return [run_backtest(documents, trace, policies, options, report=_of_seed(report, i))
                for i, (trace, options) in enumerate(runs)]
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(BACKTEST_WORKER_MODULES)
    progress = context.Queue()
    done: dict[int, dict[str, Any]] = {}
    pool = concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker_start,
                                                  initargs=(progress, log_level))
    try:
        with _signals_held() as received:
            futures = {pool.submit(_worker_run, k, documents, runs[i][0], policies[p], runs[i][1]): k
                       for k, (i, p) in enumerate(pairs)}
            waiting = set(futures)
            while waiting:
                finished, waiting = concurrent.futures.wait(waiting, timeout=0.2,
                                                            return_when=concurrent.futures.FIRST_COMPLETED)
                if received:
                    raise _Signalled(received[0])
                _drain(progress, pairs, policies, report)
                for future in finished:
                    done[futures[future]] = future.result()  # a run's error (or a dead worker's) is raised here
            _drain(progress, pairs, policies, report)
    except BaseException as exc:
        _stop_workers(pool)
        if isinstance(exc, _Signalled):
            _deliver(exc.signum)
        raise
    else:
        pool.shutdown(wait=True)
    finally:
        progress.close()
        progress.join_thread()
    return [_comparison(trace, options, [done[k] for k, (j, _p) in enumerate(pairs) if j == i])
            for i, (trace, options) in enumerate(runs)]


class _Signalled(BaseException):
    """SIGINT or SIGTERM arrived while the runs went (`_signals_held`): the workers are stopped, then the signal is
    handed to the handler it had before (`_deliver`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _signals_held() -> Iterator[list[int]]:
    """While the runs go, SIGINT and SIGTERM are only noted (in the list yielded), for the loop to act on between
    two waits. Their handlers raise (KeyboardInterrupt, or the CLI's SystemExit), and raised inside
    `concurrent.futures.wait`, which takes the futures' locks one by one, an exception can leave some of them
    taken: the pool's manager thread then blocks on one for ever, and so does this process at exit (seen in a
    test, once in hundreds of runs). A signal whose handler is to ignore it stays ignored; off the main thread
    nothing changes."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def note(signum: int, _frame: Any) -> None:
        received.append(signum)

    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum, handler in before.items():
        if handler is not signal.SIG_IGN:
            signal.signal(signum, note)
    try:
        yield received
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
    if received:  # noted after the loop's last look (the block ended without raising)
        _deliver(received[0])


def _deliver(signum: int) -> None:
    """Hand ``signum`` to its own handler, now restored (`_signals_held`): Ctrl-C's KeyboardInterrupt, the CLI's
    SystemExit; when that handler does not raise, this process exits as the signal's default would have."""
    signal.raise_signal(signum)
    raise SystemExit(128 + signum)


def _of_seed(report: Callable[[int, Policy, Status], None] | None,
             index: int) -> Callable[[Policy, Status], None] | None:
    """``run_backtest``'s report for the run of the ``index``th seed."""
    if report is None:
        return None

    def of_seed(policy: Policy, status: Status) -> None:
        report(index, policy, status)

    return of_seed


def _drain(progress: Any, pairs: Sequence[tuple[int, int]], policies: Sequence[Policy],
           report: Callable[[int, Policy, Status], None] | None) -> None:
    """Hand the statuses the workers reported so far to ``report``."""
    while True:
        try:
            index, status = progress.get_nowait()
        except queue.Empty:
            return
        if report is not None:
            seed_index, policy_index = pairs[index]
            report(seed_index, policies[policy_index], status)
