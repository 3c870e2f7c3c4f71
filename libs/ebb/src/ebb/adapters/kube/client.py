"""The kubernetes-asyncio ApiClient every ebb service uses, configured one way for all of them.

Each service names itself in the User-Agent of its requests (``ebb-termination-executor/0.1.0``, ...), so
the API server's audit log and metrics tell which ebb component sent a write: next to a real Karpenter that
is how one checks that ebb touched nothing of Karpenter's (docs/karpenter.md).

Every request without a timeout of its own gets ``DEFAULT_REQUEST_TIMEOUT`` (10 s to connect, 90 s without a
byte read): kubernetes-asyncio's default is no timeout at all, so a request caught by an apiserver restart could
wait forever and hold its command with it (found by the chaos run, docs/reliability.md). Watches set their own
(``ebb.adapters.kube.watch``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

from ebb import __version__

#: (connect, read) seconds of a request that names no timeout of its own
DEFAULT_REQUEST_TIMEOUT = (10.0, 90.0)


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
        with_default_timeout(api.rest_client)
        yield api


async def ping_apiserver(api: Any) -> None:
    """Raise unless the apiserver of ``api`` (an ApiClient) answers ``GET /version``: the readiness probe of the
    services that need it (``ebb.adapters.health``, which cuts it off after its timeout)."""
    from kubernetes_asyncio import client

    await client.VersionApi(api).get_code()


def with_default_timeout(rest_client: Any, timeout: tuple[float, float] = DEFAULT_REQUEST_TIMEOUT) -> None:
    """Give every request of ``rest_client`` (a kubernetes-asyncio ``RESTClientObject``) that names no
    ``_request_timeout`` the ``timeout`` (connect, read)."""
    request = rest_client.request

    async def timed(method: str, url: str, *args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
        return await request(method, url, *args, _request_timeout=_request_timeout or timeout, **kwargs)

    rest_client.request = timed


def user_agent(component: str) -> str:
    """The User-Agent of ``component``'s requests: ``<component>/<ebb version>``."""
    return f"{component}/{__version__}"
