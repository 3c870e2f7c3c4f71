"""The kubernetes-asyncio ApiClient every ebb service uses, configured one way for all of them."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any


@contextlib.asynccontextmanager
async def kube_client(kubeconfig: str = "", context: str = "") -> AsyncIterator[Any]:
    """An ApiClient: the given kubeconfig, else in-cluster when running in a pod
    (KUBERNETES_SERVICE_HOST set), else the default kubeconfig (~/.kube/config or $KUBECONFIG)."""
    from kubernetes_asyncio import client, config

    configuration = client.Configuration()
    if not kubeconfig and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        await config.load_kube_config(
            config_file=kubeconfig or None,
            context=context or None,
            client_configuration=configuration,
        )
    async with client.ApiClient(configuration) as api:
        yield api
