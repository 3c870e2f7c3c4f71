"""What a test of ebb next to the real Karpenter sets up before ebb's services start: Karpenter's KWOK instance types
(for ebb's ``InstanceTypeCatalog`` of exactly the types Karpenter launches), ebb's manifests applied server-side,
and which of ebb's CRDs the cluster lacks (so a test removes only the ones it made)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kit.servers import REPO

#: Karpenter's version (deploy/local/lib.sh): its KWOK instance types are read from its module source
KARPENTER_VERSION = "v1.14.1"
#: ebb's CRDs, as files of deploy/kubernetes/crds
EBB_CRDS = ("ebb.sh_disruptionpolicies.yaml", "ebb.sh_instancetypecatalogs.yaml")


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
