"""Regenerate examples/cluster.yaml, the example snapshot for ``ebb plan``, and the smaller cluster
``ebb run`` simulates by default (libs/ebb/src/ebb/data/example-cluster.yaml).

Run from the repository root::

    .venv/bin/python examples/generate.py

The snapshot is a ``kind: List`` of NodePools, Nodes, DaemonSets, PodDisruptionBudgets and Pods,
as ``kubectl get nodepools,nodes,daemonsets,pdb,pods -A -o yaml`` prints it (keys sorted). It has
no InstanceTypeCatalog document, so ``ebb plan`` uses its bundled AWS us-east-1 catalog, whose
instance types the generator draws from.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.generators import as_kubectl_list, disruption_cluster, write_yaml  # noqa: E402

NOW = "2026-11-23T18:30:00Z"
N_NODES = 300
N_PODS = 3000
SEED = 7
OUTPUT = Path(__file__).resolve().with_name("cluster.yaml")
#: the small cluster `ebb run` simulates when given no file (a package resource of ebb)
EMBEDDED_NODES = 50
EMBEDDED_PODS = 500
EMBEDDED_OUTPUT = REPO_ROOT / "libs" / "ebb" / "src" / "ebb" / "data" / "example-cluster.yaml"
HEADER = (
    "# Example cluster snapshot for `ebb plan` (synthetic: examples/generate.py,\n"
    f"# bench.generators.disruption_cluster(n_nodes={N_NODES}, n_pods={N_PODS}, seed={SEED}, now={NOW!r})).\n"
    f"# Try: ebb plan -f examples/cluster.yaml --now {NOW} --until-stable\n"
)


def main() -> int:
    start = time.perf_counter()
    docs = disruption_cluster(n_nodes=N_NODES, n_pods=N_PODS, seed=SEED, now=NOW)
    write_yaml([as_kubectl_list(docs)], OUTPUT, sort_keys=True, header=HEADER)
    small = disruption_cluster(n_nodes=EMBEDDED_NODES, n_pods=EMBEDDED_PODS, seed=SEED, now=NOW)
    write_yaml([as_kubectl_list(small)], EMBEDDED_OUTPUT, sort_keys=True, header=(
        "# The cluster `ebb run` simulates when given no file (synthetic: examples/generate.py,\n"
        f"# bench.generators.disruption_cluster(n_nodes={EMBEDDED_NODES}, n_pods={EMBEDDED_PODS}, seed={SEED}, "
        f"now={NOW!r})).\n"))
    print(f"wrote {EMBEDDED_OUTPUT} ({EMBEDDED_OUTPUT.stat().st_size / 1e6:.1f} MB)")
    kinds = Counter(d["kind"] for d in docs)
    size_mb = OUTPUT.stat().st_size / 1e6
    took = time.perf_counter() - start
    summary = ", ".join(f"{n} {k}" for k, n in kinds.items())
    print(f"wrote {OUTPUT} ({size_mb:.1f} MB, {took:.1f} s): {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
