"""ebb.adapters.kube.client: every ebb service's ApiClient names the service in its User-Agent, so the API
server's audit log tells which ebb component sent a request (tests/integration/test_karpenter_system.py
checks ebb's writes next to Karpenter by it)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from ebb import __version__
from ebb.adapters.kube.client import DEFAULT_REQUEST_TIMEOUT, kube_client, user_agent, with_default_timeout

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "http://127.0.0.1:1"}
users:
- name: local
  user: {}
contexts:
- name: local
  context: {cluster: local, user: local}
current-context: local
"""


@pytest.mark.parametrize(("component", "expected"), [
    ("ebb-termination-executor", f"ebb-termination-executor/{__version__}"),
    ("ebb-cluster-watcher", f"ebb-cluster-watcher/{__version__}"),
    (None, f"ebb/{__version__}"),
])
async def test_the_client_sends_the_components_user_agent(tmp_path: Path, component: str | None,
                                                          expected: str) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    client = kube_client(str(path)) if component is None else kube_client(str(path), component=component)
    async with client as api:
        assert api.user_agent == expected
        assert api.default_headers["User-Agent"] == expected
        assert api.configuration.host == "http://127.0.0.1:1"
    if component is not None:
        assert user_agent(component) == expected


async def _silent_server() -> tuple[asyncio.Server, int]:
    """A server that accepts connections and never answers (an apiserver caught in its restart)."""
    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client gives up
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_a_request_to_an_apiserver_that_never_answers_times_out(tmp_path: Path) -> None:
    server, port = await _silent_server()
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG.replace("127.0.0.1:1", f"127.0.0.1:{port}"))
    async with server, kube_client(str(path)) as api:
        with_default_timeout(api.rest_client, (1.0, 0.5))  # as kube_client does, with a shorter read timeout
        with pytest.raises(asyncio.TimeoutError):
            await client.CoreV1Api(api).read_node("n1")
        # a timeout named by the caller is kept
        with pytest.raises(asyncio.TimeoutError):
            await client.CoreV1Api(api).read_node("n1", _request_timeout=(1.0, 0.2))


async def test_kube_client_gives_requests_a_default_timeout(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    seen: list[Any] = []
    async with kube_client(str(path)) as api:
        assert api.rest_client.request.__qualname__ == "with_default_timeout.<locals>.timed"  # kube_client's own

        async def fake(method: str, url: str, *args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
            seen.append(_request_timeout)
            raise ConnectionError("no server")

        api.rest_client.request = fake
        with_default_timeout(api.rest_client)
        for timeout in (None, (1.0, 2.0)):
            with pytest.raises(ConnectionError):
                await client.CoreV1Api(api).read_node("n1", _request_timeout=timeout)
    assert seen == [DEFAULT_REQUEST_TIMEOUT, (1.0, 2.0)]
