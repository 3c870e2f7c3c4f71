"""The kubernetes-asyncio ApiClient every ebb service uses, configured one way for all of them.

Each service names itself in the User-Agent of its requests (``ebb-termination-executor/0.1.0``, ...), so
the API server's audit log and metrics tell which ebb component sent a write: next to a real Karpenter that
is how one checks that ebb touched nothing of Karpenter's (docs/karpenter.md)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

from ebb import __version__


@contextlib.asynccontextmanager
async def kube_client(kubeconfig: str = "", context: str = "", *, component: str = "ebb") -> AsyncIterator[Any]:
    """An ApiClient: the given kubeconfig, else in-cluster when running in a pod
    (KUBERNETES_SERVICE_HOST set), else the default kubeconfig (~/.kube/config or $KUBECONFIG); its
    User-Agent is ``user_agent(component)``."""
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
        api.user_agent = user_agent(component)
        yield api


def user_agent(component: str) -> str:
    """The User-Agent of ``component``'s requests: ``<component>/<ebb version>``."""
    return f"{component}/{__version__}"
