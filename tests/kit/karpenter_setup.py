"""What a test of ebb next to the real Karpenter sets up before ebb's services start, and removes after them:
Karpenter's KWOK instance types (for ebb's ``InstanceTypeCatalog`` of exactly the types Karpenter launches), ebb's
manifests applied server-side, which of ebb's CRDs the cluster lacks (so a test removes only the ones it made), and
`ebb_beside_karpenter`, all of it at once with a database of the test's own, taken down again whatever happened (the
planner's Lease, the catalog, the CRDs it made, the database): the session's Karpenter cluster is shared by the
tests, so each leaves it as it found it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from ebb.adapters.catalog import catalog_from_kwok_instance_types
from tests.kit.servers import REPO
from tests.kit.system import SystemSettings, create_database, drop_database

#: Karpenter's version (deploy/local/lib.sh): its KWOK instance types are read from its module source
KARPENTER_VERSION = "v1.14.1"
#: ebb's CRDs, as files of deploy/kubernetes/crds
EBB_CRDS = ("ebb.sh_disruptionpolicies.yaml", "ebb.sh_instancetypecatalogs.yaml")
EBB = "ebb.sh"


def kwok_instance_types() -> list[dict[str, Any]]:
    """Karpenter's KWOK provider's built-in instance types (the binary embeds this file of its module)."""
    go = shutil.which("go") or "/usr/local/go/bin/go"  # where deploy/local/lib.sh finds it
    cache = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, check=True,
                           env={**os.environ, "GOTOOLCHAIN": "local"}).stdout.strip()
    path = Path(cache) / f"sigs.k8s.io/karpenter@{KARPENTER_VERSION}/kwok/cloudprovider/instance_types.json"
    types: list[dict[str, Any]] = json.loads(path.read_text())
    return types


async def apply_manifests(kubeconfig: Path, paths: Sequence[Path]) -> None:
    """deploy/local/kube_apply.py (server-side apply; CRDs waited for until Established)."""
    applying = await asyncio.create_subprocess_exec(
        sys.executable, str(REPO / "deploy" / "local" / "kube_apply.py"), "--kubeconfig", str(kubeconfig),
        *map(str, paths), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    output, _ = await applying.communicate()
    assert applying.returncode == 0, output.decode(errors="replace")


async def missing_crds(api: Any, names: Sequence[str]) -> list[str]:
    """Which of the CRDs ``names`` the cluster does not have."""
    extensions = client.ApiextensionsV1Api(api)
    missing = []
    for name in names:
        try:
            await extensions.read_custom_resource_definition(name)
        except ApiException as error:
            if error.status != 404:
                raise
            missing.append(name)
    return missing


def crd_name(file: str) -> str:
    """The CRD's name of one of deploy/kubernetes/crds' files (``ebb.sh_holds.yaml``: ``holds.ebb.sh``)."""
    return f"{file.removeprefix(f'{EBB}_').removesuffix('.yaml')}.{EBB}"


@dataclass(frozen=True)
class EbbInstalled:
    """What `ebb_beside_karpenter` made: ebb's database and the catalog's name."""

    database_url: str
    catalog: str


@contextlib.asynccontextmanager
async def ebb_beside_karpenter(kubeconfig: Path, api: Any, postgres_url: str, settings: SystemSettings, *,
                               catalog: str, crds: Sequence[str] = EBB_CRDS) -> AsyncIterator[EbbInstalled]:
    """ebb's CRDs ``crds`` (files of deploy/kubernetes/crds) applied, an ``InstanceTypeCatalog`` named ``catalog`` of
    Karpenter's KWOK instance types, and a migrated database ``ebb_<the system's cluster name>``; on the way out,
    whether the test passed or not, the planner's Lease of ``settings``, the catalog, the CRDs the cluster did not
    have before and the database are removed (a test removes what else it made, its DisruptionPolicies, before)."""
    custom = client.CustomObjectsApi(api)
    made_crds = await missing_crds(api, [crd_name(f) for f in crds])
    database = f"ebb_{settings.cluster.replace('-', '_')}"
    try:
        await apply_manifests(kubeconfig, [REPO / "deploy" / "kubernetes" / "crds" / f for f in crds])
        await custom.create_cluster_custom_object(EBB, "v1", "instancetypecatalogs", catalog_from_kwok_instance_types(
            kwok_instance_types(), name=catalog))
        database_url = await create_database(postgres_url, database)
        yield EbbInstalled(database_url, catalog)
    finally:
        with contextlib.suppress(ApiException):
            await client.CoordinationV1Api(api).delete_namespaced_lease(settings.lease, "default")
        with contextlib.suppress(ApiException):
            await custom.delete_cluster_custom_object(EBB, "v1", "instancetypecatalogs", catalog)
        extensions = client.ApiextensionsV1Api(api)
        for name in made_crds:  # only those made here: the cluster is left as it was
            with contextlib.suppress(ApiException):
                await extensions.delete_custom_resource_definition(name)
        await drop_database(postgres_url, database)  # IF EXISTS
