"""Server-side apply of YAML manifests to the cluster in a kubeconfig: what `kubectl apply --server-side
--force-conflicts` does, for machines without kubectl (deploy/local/karpenter.sh applies Karpenter's CRDs and
its KWOKNodeClass with it).

Decides the order: CustomResourceDefinitions first, then waits until each is Established (a kind cannot be
applied before its CRD is served), then the other documents. A CRD that is being deleted (left by an earlier
user of the cluster) is waited out first, so the apply does not land on an object about to disappear. Each
object's resource path comes from the API's discovery document for its group/version, so any kind works.

Standard library and PyYAML only: importing a Kubernetes client package costs seconds on every start. It
reads the kubeconfig's current context: a server with its CA (file or data) and a client certificate (file or
data), or a plain http server. Exit 1 with the cause on stderr when something cannot be applied in time.

    python kube_apply.py --kubeconfig PATH [--field-manager NAME] [--timeout SECONDS] FILE|- ...
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import ssl
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

CRD_API = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def read_documents(sources: Iterable[str]) -> list[dict[str, Any]]:
    """The non-empty YAML documents of the files (``-``: stdin), in order."""
    documents: list[dict[str, Any]] = []
    for source in sources:
        text = sys.stdin.read() if source == "-" else Path(source).read_text()
        for document in yaml.safe_load_all(text):
            if not document:
                continue
            if not isinstance(document, dict) or "apiVersion" not in document or "kind" not in document:
                raise SystemExit(f"{source}: a document without apiVersion/kind")
            documents.append(document)
    return documents


def _named(entries: list[dict[str, Any]], name: str, what: str) -> dict[str, Any]:
    for entry in entries or []:
        if entry.get("name") == name:
            return dict(entry.get(what) or {})
    raise SystemExit(f"kubeconfig: no {what} named {name!r}")


@contextlib.contextmanager
def connection(kubeconfig: Path) -> Iterator[tuple[str, ssl.SSLContext | None]]:
    """The server URL and TLS context of the kubeconfig's current context (client key material is written to
    a private temporary directory for the length of the block: ssl loads certificates from files only)."""
    document = yaml.safe_load(kubeconfig.read_text())
    context = _named(document.get("contexts"), document["current-context"], "context")
    cluster = _named(document.get("clusters"), context["cluster"], "cluster")
    user = _named(document.get("users"), context["user"], "user") if context.get("user") else {}
    server = str(cluster["server"]).rstrip("/")
    if not server.startswith("https://"):
        yield server, None
        return
    with tempfile.TemporaryDirectory(prefix="kube-apply-") as tmp:

        def material(key: str) -> str | None:
            if f"{key}-data" in user or f"{key}-data" in cluster:
                source = user if f"{key}-data" in user else cluster
                path = Path(tmp) / key
                path.write_bytes(base64.b64decode(source[f"{key}-data"]))
                return str(path)
            value = user.get(key) or cluster.get(key)
            return str(kubeconfig.parent / value) if value else None

        tls = ssl.create_default_context(cafile=material("certificate-authority"))
        if cluster.get("insecure-skip-tls-verify"):
            tls.check_hostname = False
            tls.verify_mode = ssl.CERT_NONE
        certificate, key = material("client-certificate"), material("client-key")
        if certificate and key:
            tls.load_cert_chain(certificate, key)
        yield server, tls


class NotServed(LookupError):
    """The kind is not (yet) in its group/version's discovery document."""


class Cluster:
    """JSON calls to the API server, with each group/version's discovery document cached."""

    def __init__(self, server: str, tls: ssl.SSLContext | None, field_manager: str) -> None:
        self.server = server
        self.tls = tls
        self.field_manager = field_manager
        self._resources: dict[str, list[dict[str, Any]]] = {}

    def call(self, method: str, path: str, body: bytes | None = None, content_type: str | None = None) -> Any:
        request = urllib.request.Request(self.server + path, data=body, method=method,
                                         headers={"Accept": "application/json"})
        if content_type:
            request.add_header("Content-Type", content_type)
        with urllib.request.urlopen(request, timeout=10, context=self.tls) as response:
            return json.loads(response.read() or b"null")

    def path_of(self, document: dict[str, Any]) -> str:
        """The object's URL path, from the discovery document of its apiVersion."""
        api_version: str = document["apiVersion"]
        base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        if api_version not in self._resources:
            try:
                self._resources[api_version] = list(self.call("GET", base).get("resources", []))
            except urllib.error.HTTPError as error:
                if error.code == 404:
                    raise NotServed(f"{api_version} is not served") from error
                raise
        kind = document["kind"]
        resource = next((r for r in self._resources[api_version] if r.get("kind") == kind and "/" not in r["name"]),
                        None)
        if resource is None:
            del self._resources[api_version]  # not served yet: ask again next time
            raise NotServed(f"{api_version} {kind} is not served")
        metadata = document.get("metadata") or {}
        if resource.get("namespaced"):
            return f"{base}/namespaces/{metadata.get('namespace', 'default')}/{resource['name']}/{metadata['name']}"
        return f"{base}/{resource['name']}/{metadata['name']}"

    def apply(self, document: dict[str, Any]) -> None:
        query = urllib.parse.urlencode({"fieldManager": self.field_manager, "force": "true"})
        # JSON is YAML: the apply-patch body may be either
        self.call("PATCH", f"{self.path_of(document)}?{query}", json.dumps(document).encode(),
                  "application/apply-patch+yaml")

    def get(self, path: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.call("GET", path)
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise
        return found


def eventually(what: str, check: Callable[[], bool], timeout: float) -> None:
    """Call ``check`` until it returns true; SystemExit naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while True:
        try:
            if check():
                return
        except (NotServed, urllib.error.URLError) as error:
            last = error
            if isinstance(error, urllib.error.HTTPError):
                last = RuntimeError(f"HTTP {error.code}: {error.read().decode(errors='replace')[:500]}")
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not done after {timeout:.0f}s" + (f" (last error: {last})" if last else ""))
        time.sleep(0.1)


def established(crd: dict[str, Any] | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def apply_all(cluster: Cluster, documents: list[dict[str, Any]], timeout: float) -> None:
    crds = [d for d in documents if d["kind"] == "CustomResourceDefinition"]
    for crd in crds:
        path = f"{CRD_API}/{crd['metadata']['name']}"

        def not_terminating(p: str = path) -> bool:
            existing = cluster.get(p)
            return existing is None or not existing["metadata"].get("deletionTimestamp")

        eventually(f"{crd['metadata']['name']}: the earlier one deleted", not_terminating, timeout)
        cluster.apply(crd)
    for crd in crds:
        path = f"{CRD_API}/{crd['metadata']['name']}"

        def is_established(p: str = path) -> bool:
            return established(cluster.get(p))

        eventually(f"{crd['metadata']['name']} Established", is_established, timeout)
    for document in (d for d in documents if d["kind"] != "CustomResourceDefinition"):

        def applied(d: dict[str, Any] = document) -> bool:
            cluster.apply(d)  # NotServed (the kind not discovered yet) is retried
            return True

        eventually(f"{document['kind']} {document['metadata']['name']} applied", applied, timeout)
    for document in documents:
        print(f"applied {document['kind']} {document['metadata']['name']}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", required=True, type=Path)
    parser.add_argument("--field-manager", default="ebb-local")
    parser.add_argument("--timeout", type=float, default=60, help="per step: a CRD gone, Established, applied")
    parser.add_argument("files", nargs="+", help="YAML files; - reads stdin")
    arguments = parser.parse_args()
    documents = read_documents(arguments.files)
    with connection(arguments.kubeconfig) as (server, tls):
        try:
            apply_all(Cluster(server, tls, arguments.field_manager), documents, arguments.timeout)
        except urllib.error.HTTPError as error:
            raise SystemExit(f"{error.url}: HTTP {error.code}: {error.read().decode(errors='replace')[:500]}") from None
        except urllib.error.URLError as error:
            raise SystemExit(f"{server}: {error.reason}") from None


if __name__ == "__main__":
    main()
