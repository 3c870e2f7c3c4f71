"""docs/adopting.md, walked as a reader would, against the real Karpenter (its KWOK provider) on the session's
Karpenter cluster (tests/integration/conftest.py), once for the module: the guide's code blocks marked
``<!-- adopt-test: NAME -->`` are read from the page itself and their commands run as written, so the guide and
this test cannot drift apart. Where the local cluster differs from the reader's, the command is changed in plain
sight (``SUBSTITUTIONS`` and the per-step ``swap`` calls): the NodePool ``general`` is this module's, the example
node and NodeClaim names are real ones, the decisions-api's address is the local one, a two-hour recording lasts a
minute, a week of shadow mode is the minute or two of step 3 (the report's ``--since 7d`` stays: the module's
database holds only that), ``consolidateAfter: 5m`` is 0s so the test does not wait five minutes; and as there is no
Deployment here, the services are processes: the guide's ``kubectl set env`` of a Deployment sets that variable in
its service's environment (``deployment_env``), its ``helm upgrade`` to enforce mode restarts the planner and the
executor in enforce mode, and its ``kubectl scale`` of the planner's Deployment to zero stops the planner's process
(``SWITCHED``).

Who runs what: ``kubectl`` runs as the cluster's admin; ``ebb`` runs as the person step 1 gives read access to,
a ServiceAccount's token whose user name is ``$ME``, bound only by the guide's own ``kubectl create
clusterrolebinding`` commands: so the read access the guide grants is shown to be enough for ``ebb plan --live``
and ``ebb record --live``.

The cluster before the walk: a NodePool as Karpenter leaves it by default (budgets ``nodes: "10%"``,
``expireAfter: 720h``; one 2-CPU instance type, so each 1.2-CPU pod of the Deployment ``web`` has a node of its
own), three replicas, and ebb's CRDs with an ``InstanceTypeCatalog`` of Karpenter's KWOK instance types (the
catalog the guide asks for on a cloud other than AWS; the CRDs stand for step 3's install).

- Step 1: the read access applied and bound; ``ebb plan --live --provider karpenter --mode shadow`` names every
  node of the pool with the reason it stays, and the conflicts Karpenter's settings make, without refusing the
  pool; ``--until-stable`` runs; ``--node NAME`` answers for that node alone.
- Step 2: the guide's extra access for ``ebb record``; both ``ebb record --live`` commands (plain and anonymized)
  at once, for ``RECORD_FOR``, while a driver scales ``web`` up and down again: the recording holds the new pods'
  arrivals and departures and Karpenter's launches for them; the anonymized one holds none of the namespace's or
  pods' names. Then the guide's ``my-policies.yaml`` and ``ebb backtest --trace recorded.yaml --policy
  my-policies.yaml --report backtest.html`` (with ``-o json -j 1`` added, to read the figures on one core): both
  policies replay the recording without errors and cost more than nothing, and the HTML report is written.
- Step 3: the cluster-watcher, the planner, the executor (in karpenter mode) and the decisions-api started, the
  planner and the executor in shadow mode by the guide's two ``set env`` lines, and the guide's policies applied;
  a driver scales ``web`` to four and back to three, and Karpenter removes the emptied node. The guide's ``curl``
  lists exactly the shadow decisions the store holds, ``ebb explain --api`` answers for a node, and ``ebb shadow
  report --since 7d ... --report shadow.html`` prints the report and writes the page, whose figures are checked
  against the facts: the node Karpenter removed listed as Karpenter's (alone or with ebb's decision), and no other
  of the pool's; the shadow decisions counted by state as the store holds them; every *ebb only* entry an approved
  shadow decision whose nodes still run. From the audit log: no write of ebb's but the planner's Lease; from the
  store: no decision but shadow ones, no outbox message, no ledger row. The services keep running into step 4.
- Step 4, for the one NodePool: the two NodePool settings patched, the DisruptionPolicy applied; the conflict
  check (``ebb plan`` in enforce mode) then names only ``NodeClaimExpiry``, the NodeClaims launched with 720h; each
  replaced with ``kubectl delete nodeclaim`` as the guide says, one at a time; the check is clean; the planner and
  the executor restarted in enforce mode; ``web`` loses a replica, and ebb deletes the emptied node: an
  ``emptiness`` decision that succeeds, the NodeClaim deleted by ebb's executor and the Node by Karpenter, the
  policy's ``ConflictFree`` condition True, Karpenter's own voluntary disruption decisions unchanged.
- Going back: the planner stopped, nothing left approved or executing (what the two ``curl`` lines ask the
  decisions-api, read from its store), the NodePool's settings restored and the DisruptionPolicy deleted; ``ebb
  plan`` sees Karpenter's budgets again; ``web`` loses another replica and Karpenter itself removes the emptied
  node, and replaces the NodeClaims launched with ``expireAfter: Never``, which it now finds drifted.

The marks themselves are checked without a cluster: the guide marks exactly the blocks the steps run, and each is
also ``<!-- norun -->`` for tests/docs/test_docs.py, which runs the pages' ``ebb`` commands without a cluster.

Run it alone: ``flock /tmp/ebb-integration.lock .venv/bin/pytest tests/integration/test_adopt_guide.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from ebb.core.traces import Trace
from tests.kit.karpenter_cluster import KarpenterCluster, KarpenterKit, Metrics
from tests.kit.karpenter_setup import ebb_beside_karpenter
from tests.kit.kube_audit import AuditLog
from tests.kit.servers import REPO, KafkaServer, PostgresServer
from tests.kit.system import Servers, System, SystemSettings, jv, query
from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration

GUIDE = REPO / "docs" / "adopting.md"
MARK = re.compile(r"^\s*<!--\s*adopt-test:\s*(.+?)\s*-->\s*$")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*(\S*)")
EBB_BIN = Path(sys.executable).parent
EBB_CRDS = ("ebb.sh_disruptionpolicies.yaml", "ebb.sh_instancetypecatalogs.yaml", "ebb.sh_holds.yaml")
#: ebb's services, as processes: step 3 starts them
SERVICES = ("cluster-watcher", "consolidation-planner", "termination-executor", "decisions-api")
DECISIONS = "karpenter_voluntary_disruption_decisions_total"
#: the one instance type of the module's NodePool (2 CPU) and the request of each of web's pods
INSTANCE_TYPE, POD_CPU = "c-2x-amd64-linux", "1200m"
#: how long the recording lasts instead of the guide's two hours
RECORD_FOR = "60s"
#: the guide's switch of the planner and the executor to enforce mode, and its scale of the planner to zero: this
#: module restarts the two processes in enforce mode, or stops the planner's
SWITCHED = {
    "helm upgrade ebb charts/ebb -n ebb-system --reuse-values --set mode=enforce": "enforce",
    "kubectl -n ebb-system scale deployment ebb-consolidation-planner --replicas 0": "stop",
}
#: the guide's ``kubectl set env`` of one of ebb's Deployments
SET_ENV = re.compile(r"^kubectl -n ebb-system set env deploy/ebb-(?P<service>[a-z-]+) (?P<variable>EBB_\w+)="
                     r"(?P<value>\S+)$")
#: the decisions-api's address in the guide
GUIDE_API = "http://ebb-decisions-api:8080"
#: every write a request can make (the audit log's verbs)
WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})
FINISHED = ("succeeded", "failed", "rolled_back")


# ----------------------------------------------------------------------------------------- the guide's blocks


@dataclass(frozen=True)
class Block:
    """A fenced block of the guide marked ``<!-- adopt-test: NAME -->`` (among the comments above its fence)."""

    name: str
    info: str
    line: int
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def commands(self) -> list[str]:
        """Each command line (blank and comment lines skipped; a trailing ``\\`` joins the next)."""
        out: list[str] = []
        pending = ""
        for raw in self.lines:
            line = raw.strip()
            if not pending and (not line or line.startswith("#")):
                continue
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            out.append(pending + line)
            pending = ""
        return out


def guide_blocks(text: str) -> dict[str, Block]:
    lines = text.splitlines()
    found: dict[str, Block] = {}
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        fence = opened.group(1)
        end = next((j for j in range(i + 1, len(lines))
                    if re.match(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[j])), len(lines))
        j = i - 1
        while j >= 0 and (not lines[j].strip() or lines[j].strip().startswith("<!--")):
            mark = MARK.match(lines[j])
            if mark:
                name = mark.group(1)
                assert name not in found, f"docs/adopting.md: two blocks marked {name}"
                found[name] = Block(name, opened.group(2), i + 1, tuple(lines[i + 1:end]))
            j -= 1
        i = end + 1
    return found


BLOCKS = guide_blocks(GUIDE.read_text(encoding="utf-8"))


def block(name: str) -> Block:
    assert name in BLOCKS, f"docs/adopting.md has no block marked <!-- adopt-test: {name} --> (it has {sorted(BLOCKS)})"
    return BLOCKS[name]


def swap(command: str, pairs: Mapping[str, str]) -> str:
    """``command`` with each word ``old`` of ``pairs`` (not part of a longer name) replaced by ``new``."""
    for old, new in sorted(pairs.items(), key=lambda p: -len(p[0])):
        command = re.sub(rf"(?<![\w.-]){re.escape(old)}(?![\w-])", new, command)
    return command


# ----------------------------------------------------------------------------------------- the module's cluster


@dataclass
class Walk:
    """The cluster, the reader's shell and what the steps hand on to each other."""

    kit: KarpenterKit
    pool: str
    workdir: Path
    admin: dict[str, str]
    reader: dict[str, str]
    audit: AuditLog
    system: System
    database_url: str
    cluster_name: str
    #: the planner's Lease, ebb's one write to the cluster in shadow mode
    lease: str
    #: the guide's names → this cluster's (the NodePool; the others are added by the steps that find them)
    names: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def run(self, command: str, *, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A command of the guide in bash, in the reader's directory: ``ebb`` as the reader, the rest as admin."""
        env = self.reader if command.split(maxsplit=1)[0] == "ebb" else self.admin
        done = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=self.workdir, env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)
        if check:
            assert done.returncode == 0, f"`{command}` exited {done.returncode}\n{done.stdout[-3000:]}\n" \
                                         f"{done.stderr[-3000:]}"
        return done

    async def arun(self, command: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(self.run, command, **kwargs)

    def here(self, command: str, **more: str) -> str:
        return swap(command, {**self.names, **more})

    async def claims(self) -> list[dict[str, Any]]:
        return await self.kit.nodeclaims(self.pool)

    async def settled(self, replicas: int, within: float = 120) -> list[dict[str, Any]]:
        """Wait until ``web`` runs ``replicas`` pods, each on a node of the pool's own that Karpenter has initialized
        (``karpenter.sh/initialized``, without which ebb leaves a node alone), and the pool has no other NodeClaim;
        return the NodeClaims."""

        async def done() -> list[dict[str, Any]] | None:
            pods = await self.kit.running_pods("web")
            claims = await self.claims()
            ready = [c for c in claims if (c.get("status") or {}).get("nodeName")
                     and not c["metadata"].get("deletionTimestamp")]
            nodes = {c["status"]["nodeName"] for c in ready}
            initialized = {n.metadata.name for n in await self.kit.nodes(self.pool)
                           if (n.metadata.labels or {}).get("karpenter.sh/initialized") == "true"}
            right = (len(pods) == replicas == len(claims) == len(ready) and set(pods.values()) == nodes
                     and nodes <= initialized)
            return claims if right else None

        claims: list[dict[str, Any]] = await eventually(f"web at {replicas} pods, one per node of {self.pool}",
                                                        done, within=within, interval=1)
        return claims

    async def decisions(self, *, shadow: bool = False, anywhere: bool = False) -> list[Any]:
        """ebb's decisions about the pool's nodes (``anywhere``: about any node), oldest first: the real ones, or
        (``shadow``) step 3's."""
        rows = await query(self.database_url, "SELECT * FROM decisions WHERE cluster = $1 AND shadow = $2 "
                                              "ORDER BY created_at, id", self.cluster_name, shadow)
        return [d for d in rows if anywhere or any(n.get("nodePool") == self.pool for n in jv(d["nodes"]))]


async def reader_kubeconfig(kit: KarpenterKit, workdir: Path) -> tuple[Path, str]:
    """A kubeconfig for the cluster whose user is a ServiceAccount (its token), and that user's name."""
    name = "adopt-reader"
    await kit.core.create_namespaced_service_account(kit.namespace, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name=name)))
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[],
                                                                                 expiration_seconds=3600))
    token = await kit.core.create_namespaced_service_account_token(name, kit.namespace, request)
    config = yaml.safe_load(kit.cluster.kubeconfig.read_text(encoding="utf-8"))
    config["users"] = [{"name": name, "user": {"token": token.status.token}}]
    for context in config["contexts"]:
        context["context"]["user"] = name
    path = workdir / "reader.kubeconfig"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path, f"system:serviceaccount:{kit.namespace}:{name}"


@pytest.fixture(scope="module")
async def walk(karpenter_cluster: KarpenterCluster, karpenter_api: Any, kafka_server: KafkaServer,
               postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Walk]:
    assert karpenter_cluster.audit_log is not None, "the Karpenter cluster writes no audit log: restart it"
    run = uuid.uuid4().hex[:8]
    workdir = tmp_path_factory.mktemp("adopt")
    (workdir / "deploy").symlink_to(REPO / "deploy")
    kit = KarpenterKit(karpenter_cluster, karpenter_api, run=run)
    custom = client.CustomObjectsApi(karpenter_api)
    namespace_existed = not await missing_namespaces(karpenter_api, ["ebb-system"])
    settings = SystemSettings(run=f"a{run}", queue_url="", validation_delay=2.0)
    async with ebb_beside_karpenter(karpenter_cluster.kubeconfig, karpenter_api, postgres_server.url, settings,
                                    catalog=f"adopt-kwok-{run}", crds=EBB_CRDS) as installed:
        servers = Servers(kafka_bootstrap=kafka_server.bootstrap, database_url=installed.database_url,
                          kubeconfig=str(karpenter_cluster.kubeconfig), aws_endpoint="")
        system = System(servers, settings, workdir / "logs", only=SERVICES)
        system["consolidation-planner"].env["EBB_CONSOLIDATION_PLANNER_PROVIDER"] = "karpenter"
        system["termination-executor"].env["EBB_TERMINATION_EXECUTOR_PROVIDER"] = "karpenter"
        bindings: list[str] = []
        try:
            await kit.setup()
            pool = await kit.create_nodepool("general", budgets=[{"nodes": "10%"}], expire_after="720h",
                                             instance_types=[INSTANCE_TYPE])
            await kit.create_deployment("web", pool, 3, cpu=POD_CPU)
            reader_path, me = await reader_kubeconfig(kit, workdir)
            base = {**os.environ, "PATH": f"{EBB_BIN}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1",
                    "COLUMNS": "200", "ME": me, "TOKEN": settings.token}
            made = Walk(kit, pool, workdir, admin={**base, "KUBECONFIG": str(karpenter_cluster.kubeconfig)},
                        reader={**base, "KUBECONFIG": str(reader_path)}, audit=AuditLog(karpenter_cluster.audit_log),
                        system=system, database_url=installed.database_url, cluster_name=settings.cluster,
                        lease=settings.lease, names={"general": pool})
            bindings += [f"ebb-plan-{me}", f"ebb-record-{me}"]
            await made.settled(3)
            yield made
            print("\nadoption guide, seconds per step: "
                  + ", ".join(f"{step} {seconds:.0f}" for step, seconds in made.timings.items()))
        finally:
            await system.stop()
            rbac = client.RbacAuthorizationV1Api(karpenter_api)
            for binding in bindings:
                with contextlib.suppress(ApiException):
                    await rbac.delete_cluster_role_binding(binding)
            for role in ("ebb-record-reader", "ebb-plan-reader"):
                with contextlib.suppress(ApiException):
                    await rbac.delete_cluster_role(role)
            with contextlib.suppress(ApiException):
                await rbac.delete_cluster_role_binding("ebb-plan")
            if not namespace_existed:
                with contextlib.suppress(ApiException):
                    await client.CoreV1Api(karpenter_api).delete_namespace("ebb-system")
            with contextlib.suppress(ApiException):
                await custom.delete_cluster_custom_object("ebb.sh", "v1", "disruptionpolicies", f"general-{run}")
            with contextlib.suppress(ApiException):
                await client.AppsV1Api(karpenter_api).delete_namespaced_deployment("web", kit.namespace)
            await kit.cleanup(within=120)


async def missing_namespaces(api: Any, names: list[str]) -> list[str]:
    core = client.CoreV1Api(api)
    missing = []
    for name in names:
        try:
            await core.read_namespace(name)
        except ApiException as error:
            if error.status != 404:
                raise
            missing.append(name)
    return missing


def table_rows(output: str, title: str) -> dict[str, list[str]]:
    """The rows of the table under ``title`` in ``ebb plan``'s table output: first cell → the cells."""
    rows: dict[str, list[str]] = {}
    inside = False
    for line in output.splitlines():
        if line.startswith(title):
            inside = True
            continue
        if inside and line and line[0] not in "┏┃┡│└":
            break
        if inside and line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            rows[cells[0]] = cells
    return rows


def conflicts(output: str, pool: str) -> list[str]:
    """The kinds of the ``conflict (KIND): ...`` lines above ``ebb plan``'s tables that name NodePool ``pool`` (the
    session's cluster may hold other tests' objects)."""
    return [line.split(")", 1)[0].removeprefix("conflict (") for line in output.splitlines()
            if line.startswith("conflict (") and re.search(rf"\b{re.escape(pool)}\b", line)]


async def recording(process: asyncio.subprocess.Process) -> None:
    """Wait until ``ebb record`` says it records (``ebb record: from ...``, once the cluster is read)."""
    assert process.stderr is not None
    said: list[str] = []
    while not said or not said[-1].startswith("ebb record: from"):
        line = (await asyncio.wait_for(process.stderr.readline(), timeout=120)).decode()
        assert line, f"ebb record ended before recording: {''.join(said)}"
        said.append(line)


def deployment_env(command: str) -> tuple[str, str, str]:
    """The service, variable and value of the guide's ``kubectl -n ebb-system set env deploy/ebb-SERVICE VAR=VALUE``
    (the variable one of that service's own)."""
    match = SET_ENV.match(command)
    assert match, f"not a `kubectl set env` of one of ebb's Deployments: {command}"
    service, variable = match["service"], match["variable"]
    assert service in SERVICES and variable.startswith(f"EBB_{service.upper().replace('-', '_')}_"), command
    return service, variable, match["value"]


def mode_variable(service: str) -> str:
    return f"EBB_{service.upper().replace('-', '_')}_MODE"


def planner_mode(system: System) -> str:
    """The mode the planner's current process says it started in."""
    started = [line for line in system["consolidation-planner"].lines()
               if line.get("event") == "consolidation-planner starting"]
    assert started, system["consolidation-planner"].tail()
    return str(started[-1]["mode"])


def timed(walk: Walk, step: str) -> Callable[[], None]:
    began = time.monotonic()

    def done() -> None:
        walk.timings[step] = time.monotonic() - began

    return done


# ----------------------------------------------------------------------------------------- the steps

#: every block the guide marks for this test, each run by one of the steps below
RUN_HERE = {"step-1", "step-2", "file my-policies.yaml", "step-2-backtest", "step-3", "step-3-watch",
            "step-3-report", "step-4", "step-4-nodeclaims", "step-4-planner", "back"}


def test_the_guide_marks_exactly_the_blocks_this_module_runs() -> None:
    """A block marked in the guide that no step runs would be untested without failing: the marks are these, and
    each marked block is also ``<!-- norun -->`` for tests/docs (it needs a cluster)."""
    assert set(BLOCKS) == RUN_HERE
    text = GUIDE.read_text(encoding="utf-8").splitlines()
    for marked in BLOCKS.values():
        before = next(line.strip() for line in reversed(text[:marked.line - 1]) if line.strip())
        assert before == "<!-- norun -->", f"docs/adopting.md:{marked.line}: {marked.name} is not <!-- norun -->"


async def test_step_1_what_ebb_would_do_and_why_not_this_node(walk: Walk) -> None:
    done = timed(walk, "step 1")
    grant, bind, one_pass, until_stable, why_not = block("step-1").commands()
    assert grant.startswith("kubectl apply") and bind.startswith("kubectl create clusterrolebinding"), (grant, bind)
    await walk.arun(grant)
    await walk.arun(bind)
    nodes = sorted(c["status"]["nodeName"] for c in await walk.claims())
    walk.names["ip-10-0-1-7.ec2.internal"] = nodes[0]

    planned = await walk.arun(walk.here(one_pass))
    assert "read https://" in planned.stderr and "NodeClaim" in planned.stderr, planned.stderr
    # Karpenter is still in charge: its settings are conflicts, reported, and in shadow mode they refuse nothing
    found = set(conflicts(planned.stdout, walk.pool))
    assert {"KarpenterBudgets", "KarpenterExpiry", "NodeClaimExpiry"} <= found, planned.stdout
    kept = table_rows(planned.stdout, "Not disrupted, and why")
    assert set(nodes) <= kept.keys(), planned.stdout
    for node in nodes:  # one pod each that fits nowhere else: each node named with that reason
        assert "its pods do not fit on the other nodes" in kept[node][-1], kept[node]
    assert "until this conflict is fixed" not in planned.stdout
    assert "Budgets (disruptions allowed now)" in planned.stdout and walk.pool in planned.stdout

    settled = await walk.arun(walk.here(until_stable))
    assert set(nodes) <= table_rows(settled.stdout, "Not disrupted, and why").keys(), settled.stdout

    asked = await walk.arun(walk.here(why_not))
    one = table_rows(asked.stdout, "Not disrupted, and why")
    assert list(one) == [nodes[0]], asked.stdout  # that node, and no other
    assert nodes[1] not in asked.stdout and nodes[0] in asked.stdout
    assert "its pods do not fit on the other nodes" in one[nodes[0]][-1]
    done()


async def test_step_2_record_the_cluster_and_back_test_it(walk: Walk) -> None:
    done = timed(walk, "step 2")
    role, bind, record, record_anonymized = block("step-2").commands()
    await walk.arun(role)
    await walk.arun(bind)
    recorders = [await asyncio.create_subprocess_exec(
        "bash", "-o", "pipefail", "-c", walk.here(command, **{"2h": RECORD_FOR}), cwd=walk.workdir, env=walk.reader,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE) for command in (record, record_anonymized)]
    try:
        for recorder in recorders:  # each has read the cluster and watches it
            await recording(recorder)
        # the driver: two more pods (Karpenter launches a node for each), then back to three
        first_pods = set(await walk.kit.running_pods("web"))
        before = {c["metadata"]["name"] for c in await walk.claims()}
        await walk.kit.scale_deployment("web", 5)
        grown = await walk.settled(5, within=90)
        launched = {c["status"]["nodeName"] for c in grown if c["metadata"]["name"] not in before}
        pods_at_five = set(await walk.kit.running_pods("web"))
        await asyncio.sleep(3)
        await walk.kit.scale_deployment("web", 3)

        async def scaled_down() -> set[str] | None:
            running = await walk.kit.running_pods("web")
            return pods_at_five - set(running) if len(running) == 3 else None

        gone = await eventually("web back at three pods", scaled_down, within=60)
        outputs = [await asyncio.wait_for(r.communicate(), timeout=180) for r in recorders]  # their ends
    finally:
        for recorder in recorders:
            if recorder.returncode is None:
                recorder.kill()
                await recorder.wait()
    for recorder, (_, err) in zip(recorders, outputs, strict=True):
        assert recorder.returncode == 0, err.decode()[-3000:]
    new_pods = pods_at_five - first_pods
    assert len(launched) == 2 and len(new_pods) == 2 and len(gone) == 2, (launched, new_pods, gone)

    trace = Trace.model_validate(yaml.safe_load((walk.workdir / "recorded.yaml").read_text(encoding="utf-8")))
    ours = walk.kit.namespace
    arrived = {e.create.objects[0]["metadata"]["name"] for e in trace.events
               if e.create and e.create.objects[0]["metadata"].get("namespace") == ours}
    departed = {e.depart.name for e in trace.events if e.depart and e.depart.namespace == ours}
    assert new_pods <= arrived and gone <= departed, (new_pods, arrived, gone, departed)
    changes = [c for c in trace.observed if c.nodepool == walk.pool]
    provisioned = {c.node for c in changes if (c.change, c.by, c.reason) == ("launched", "karpenter", "provisioning")}
    assert launched <= provisioned, (launched, changes)
    assert all(c.by == "karpenter" for c in changes), changes  # Karpenter is in charge: every change is its own
    shared = (walk.workdir / "recorded-to-share.yaml").read_text(encoding="utf-8")
    assert walk.pool in shared  # NodePool names stay
    for name in (ours, *arrived, *departed):
        assert name not in shared, f"{name} in the anonymized recording"

    # the guide's policy file, and the back-test of the recording under Karpenter's defaults and under it
    policies = block("file my-policies.yaml")
    assert policies.info == "yaml"
    text = walk.here(policies.text, **{"consolidateAfter: 5m": "consolidateAfter: 0s"})
    assert f"name: {walk.pool}" in text and "consolidateAfter: 0s" in text, text
    (walk.workdir / "my-policies.yaml").write_text(text, encoding="utf-8")
    [backtest] = block("step-2-backtest").commands()
    replayed = await walk.arun(walk.here(backtest) + " -o json -j 1")  # the figures as JSON; one core
    result = json.loads(replayed.stdout)
    assert [p["name"] for p in result["policies"]] == ["karpenter-default", "my-policies"], result["policies"]
    for policy in result["policies"]:
        assert policy["trace_errors"] == [], policy
        summary = policy["summary"]
        assert summary["node_hours_cost"] > 0 and summary["launches"] >= 2, summary
        assert summary["pending_pods_at_end"] == 0, summary
    report = (walk.workdir / "backtest.html").read_text(encoding="utf-8")
    assert "<html" in report.lower() and "my-policies" in report
    print("\nback-test of the recording: " + "; ".join(
        f"{p['name']}: ${p['summary']['node_hours_cost']:.4f}, {p['summary']['launches']} launches"
        for p in result["policies"]))
    await walk.settled(3, within=120)  # Karpenter consolidated the two emptied nodes (or does so now)
    done()


async def test_step_3_shadow_mode_and_its_report(walk: Walk) -> None:
    done = timed(walk, "step 3")
    *modes, apply = block("step-3").commands()
    # the Deployments' environment is the processes': each `set env` line is its service's, which then starts
    assert {deployment_env(command)[0] for command in modes} == {"consolidation-planner", "termination-executor"}
    for command in modes:
        service, variable, value = deployment_env(command)
        assert (variable, value) == (mode_variable(service), "shadow"), command
        walk.system[service].env[variable] = value
    since = walk.audit.mark()
    await walk.system.start(*SERVICES)
    assert planner_mode(walk.system) == "shadow"
    await walk.arun(walk.here(apply))

    # the week, in short: one replica more (Karpenter launches a node for it) and back to three; Karpenter removes
    # the emptied node, and ebb, watching, keeps the removal with its verdict on the node
    await walk.kit.scale_deployment("web", 4)
    at_four = {c["status"]["nodeName"] for c in await walk.settled(4, within=90)}
    await walk.kit.scale_deployment("web", 3)
    left = {c["status"]["nodeName"] for c in await walk.settled(3, within=120)}
    removed = at_four - left
    assert len(removed) == 1 and left < at_four, (at_four, left)

    async def kept() -> list[Any] | None:
        walk.system.check_running()
        rows = await query(walk.database_url, "SELECT * FROM shadow_removals WHERE cluster = $1 AND node = ANY($2)",
                           walk.cluster_name, list(removed))
        return rows or None

    [removal] = await eventually("the shadow planner kept Karpenter's removal", kept, within=60,
                                 on_timeout=walk.system.tails)
    assert removal["removed_by"] == "karpenter", dict(removal)

    # while it runs: the shadow decisions as the API lists them, and why a node is left alone
    walk.names[GUIDE_API] = walk.system.api
    walk.names["ip-10-0-1-7.ec2.internal"] = sorted(left)[0]
    listing, explain = block("step-3-watch").commands()
    shadow = await walk.decisions(shadow=True, anywhere=True)  # the report's and the API's: the whole cluster's
    assert len(shadow) < 20, shadow  # so the guide's first page lists them all
    listed = json.loads((await walk.arun(walk.here(listing))).stdout)["items"]
    assert all(d["shadow"] for d in listed), listed
    assert {d["id"] for d in listed} == {d["id"] for d in shadow}, (listed, shadow)
    explained = await walk.arun(walk.here(explain))
    assert sorted(left)[0] in explained.stdout, explained.stdout

    # the report, on the terminal and as a page, against the facts
    [report] = block("step-3-report").commands()
    assert "--since 7d" in report and "--report shadow.html" in report, report
    words = (await walk.arun(walk.here(report))).stdout
    answer = json.loads((await walk.arun(walk.here(report) + " -o json")).stdout)
    ours = [e for e in answer["karpenterOnly"] + answer["both"] if e["nodePool"] == walk.pool]
    assert {e["node"] for e in ours} == removed and all(e["removedBy"] == "karpenter" for e in ours), answer
    shadow = await walk.decisions(shadow=True, anywhere=True)
    states = [d["state"] for d in shadow]
    counts = answer["counts"]
    assert (counts["shadowDecisions"], counts["approved"], counts["proposed"], counts["rejected"]) == (
        len(shadow), states.count("approved"), states.count("proposed"), states.count("rejected")), (counts, states)
    approved = {d["id"]: d for d in shadow if d["state"] == "approved"}
    for entry in answer["ebbOnly"]:  # what ebb would have added: approved, its nodes still there
        assert entry["id"] in approved and set(entry["kept"]) <= left, (entry, approved)
        assert entry["savingsPerHour"] == pytest.approx(float(approved[entry["id"]]["savings"]))
    assert f"Karpenter removed {counts['karpenterRemovals']} node(s)" in words and removal["node"] in words, words
    page = (walk.workdir / "shadow.html").read_text(encoding="utf-8")
    assert 'id="karpenter-only"' in page and removal["node"] in page
    print(f"\n$ {walk.here(report)}\n{words}")

    # watching only: no write of ebb's to the cluster but the planner's Lease; nothing queued, no budget taken
    events = walk.audit.events(since)
    writes = [str(e) for e in events
              if e.by_ebb and e.verb in WRITES and (e.resource, e.name) != ("leases", walk.lease)]
    assert writes == [] and not any(e.by_ebb and e.subresource == "eviction" for e in events), writes
    assert await walk.decisions() == []
    for table in ("outbox", "budget_ledger"):
        assert await query(walk.database_url, f"SELECT 1 FROM {table} WHERE cluster = $1", walk.cluster_name) == []
    walk.system.check_running()
    done()


async def test_step_4_hand_one_nodepool_over(walk: Walk) -> None:
    done = timed(walk, "step 4")
    walk.system.check_running()  # step 3's services, in shadow mode still
    show, patch, apply, check = block("step-4").commands()
    shown = await walk.arun(walk.here(show))
    assert shown.stdout.split() == ['[{"nodes":"10%"}]', "720h"], shown.stdout
    await walk.arun(walk.here(patch))
    await walk.arun(walk.here(apply))
    checked = await walk.arun(walk.here(check))
    # Karpenter's two settings are off; the NodeClaims launched before keep their 720h, so the pool stays refused
    assert conflicts(checked.stdout, walk.pool) == ["NodeClaimExpiry"], checked.stdout
    assert "until this conflict is fixed" in checked.stdout

    listing, delete = block("step-4-nodeclaims").commands()
    listed = await walk.arun(walk.here(listing))
    old = {line.split()[0]: line.split()[1] for line in listed.stdout.splitlines()[1:] if line.strip()}
    assert len(old) == 3 and set(old.values()) == {"720h"}, listed.stdout
    [example] = [w for w in delete.split() if w.startswith("general-")]
    for claim in old:  # one at a time, each once web runs again
        await walk.arun(walk.here(delete, **{example: claim}))
        await walk.settled(3)
    claims = await walk.claims()
    assert not {c["metadata"]["name"] for c in claims} & old.keys()
    assert {c["spec"].get("expireAfter") for c in claims} == {"Never"}, claims
    clean = await walk.arun(walk.here(check))
    assert conflicts(clean.stdout, walk.pool) == [], clean.stdout

    [switch] = block("step-4-planner").commands()
    assert SWITCHED[switch] == "enforce"
    before = await walk.kit.metrics()
    since = walk.audit.mark()
    # mode=enforce, each service restarted with it as its Deployment's rollout would
    for service in ("consolidation-planner", "termination-executor"):
        await walk.system[service].stop()
        walk.system[service].env[mode_variable(service)] = "enforce"
    await walk.system.start("consolidation-planner", "termination-executor")
    assert planner_mode(walk.system) == "enforce"

    async def conflict_free() -> dict[str, Any] | None:
        policy = await walk.kit.custom.get_cluster_custom_object("ebb.sh", "v1", "disruptionpolicies", walk.pool)
        return next((c for c in (policy.get("status") or {}).get("conditions") or ()
                     if c["type"] == "ConflictFree" and c["status"] == "True"), None)

    await eventually("the DisruptionPolicy ConflictFree", conflict_free, within=60, on_timeout=walk.system.tails)
    # one replica less: its node is empty, and ebb deletes it
    await walk.kit.scale_deployment("web", 2)

    async def decided() -> Any:
        walk.system.check_running()
        rows = [d for d in await walk.decisions() if d["state"] in FINISHED]
        return rows[0] if rows else None

    decision = await eventually("ebb's decision about the emptied node finished", decided, within=150,
                                on_timeout=walk.system.tails)
    assert (decision["method"], decision["reason"], decision["action"], decision["state"]) == (
        "emptiness", "Empty", "delete", "succeeded"), dict(decision)
    [node] = [n["name"] for n in jv(decision["nodes"])]
    [claim] = [c["metadata"]["name"] for c in claims if c["status"]["nodeName"] == node]
    await walk.kit.wait_until_gone(nodeclaims=[claim], nodes=[node], within=60)
    await walk.settled(2)
    events = walk.audit.events(since)
    # ebb asked for the NodeClaim's deletion (Karpenter deletes it again as its termination ends)
    deletes = [e.component for e in events if e.verb == "delete" and e.resource == "nodeclaims" and e.name == claim]
    assert deletes[:1] == ["ebb-termination-executor"], [str(e) for e in events if e.resource == "nodeclaims"]
    assert any(e.component == "karpenter" and e.resource == "nodes" and e.verb == "delete" and e.name == node
               for e in events), "Karpenter did not delete the Node"
    assert (await walk.kit.metrics()).value(DECISIONS) == before.value(DECISIONS), "Karpenter disrupted itself"
    assert len(await walk.decisions()) == 1
    done()


async def test_going_back_restores_karpenter(walk: Walk) -> None:
    done = timed(walk, "going back")
    stop, approved, executing, restore, delete = block("back").commands()
    assert SWITCHED[stop] == "stop"
    assert "state=approved" in approved and "state=executing" in executing
    await walk.system["consolidation-planner"].stop()

    async def nothing_left() -> bool:  # the decisions-api's answer to the two curl lines, read from its store
        return not [d for d in await walk.decisions() if d["state"] in ("approved", "executing")]

    assert await eventually("no decision approved or executing", nothing_left, within=60)
    await walk.arun(walk.here(restore))
    await walk.arun(walk.here(delete))
    pool = await walk.kit.custom.get_cluster_custom_object("karpenter.sh", "v1", "nodepools", walk.pool)
    assert pool["spec"]["disruption"]["budgets"] == [{"nodes": "10%"}]
    assert pool["spec"]["template"]["spec"]["expireAfter"] == "720h"
    back = await walk.arun(walk.here(block("step-4").commands()[-1]))
    # the NodePool is Karpenter's again, as ebb's conflict check sees it
    assert "KarpenterBudgets" in conflicts(back.stdout, walk.pool), back.stdout

    # Karpenter consolidates again: one replica less, and Karpenter removes the emptied node itself
    before: Metrics = await walk.kit.metrics()
    decisions_before = len(await walk.decisions())
    await walk.kit.scale_deployment("web", 1)
    await walk.settled(1, within=120)
    assert (await walk.kit.metrics()).value(DECISIONS) > before.value(DECISIONS)

    # the NodeClaims launched with Never are drifted now that the NodePool says 720h: Karpenter replaces them
    async def replaced() -> bool:
        claims = await walk.claims()
        return bool(claims) and {c["spec"].get("expireAfter") for c in claims} == {"720h"}

    assert await eventually("Karpenter replacing the NodeClaims launched with Never", replaced, within=120,
                            interval=1)
    await walk.settled(1, within=60)
    assert len(await walk.decisions()) == decisions_before  # none of ebb's
    done()
