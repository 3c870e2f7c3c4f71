"""Generate ebb's bundled instance-type catalog, ``aws-us-east-1.yaml``.

The catalog is one ``ebb.sh/v1`` ``InstanceTypeCatalog`` document. Everything in it comes from the
table below and the formulas in this module, so it is regenerated exactly with::

    .venv/bin/python libs/ebb/src/ebb/data/make_aws_catalog.py          # rewrite the YAML
    .venv/bin/python libs/ebb/src/ebb/data/make_aws_catalog.py --check  # exit 1 if it is stale

Figures (see docs/catalog.md):

* vCPU, memory (GiB) and GPUs are the EC2 instance-type specifications.
* ``maxPods`` is the EKS (VPC CNI, no prefix delegation) limit from the ENI limits:
  ``ENIs * (IPv4 addresses per ENI - 1) + 2``.
* The on-demand price is the us-east-1 Linux on-demand hourly list price as recorded for
  ``PRICES_AS_OF``. They are for planning and comparing options only, not billing.
* Spot prices are synthetic: a typical spot discount (the spot price is 30-40 % of on-demand), varied per
  type and zone deterministically from a hash of the name, never from a random source.
* The overhead is what Karpenter (AWS provider) subtracts from capacity by default: kube-reserved CPU
  and memory plus the kubelet's hard eviction threshold (``memory.available<100Mi``).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path
from typing import Any, NamedTuple

import yaml

REGION = "us-east-1"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
PRICES_AS_OF = "2025-01-01"
CATALOG_NAME = "aws-us-east-1"
OUTPUT = Path(__file__).with_name("aws-us-east-1.yaml")

EVICTION_THRESHOLD_MIB = 100
SPOT_RATIO_LOW = 0.31
SPOT_RATIO_HIGH = 0.39
SPOT_ZONE_JITTER = 0.01

# GPU model per family: (label value for karpenter.k8s.aws/instance-gpu-name, memory per GPU in MiB).
GPU_MODELS: dict[str, tuple[str, int]] = {"g4dn": ("t4", 16384), "g5": ("a10g", 24576)}


class InstanceType(NamedTuple):
    """One row of the table: the EC2 specification, the EKS pod limit and the on-demand list price."""

    name: str
    vcpu: int
    memory_gib: int
    max_pods: int
    on_demand_price: float
    arch: str
    gpus: int


# fmt: off
# name, vCPU, memory GiB, EKS max pods, us-east-1 Linux on-demand $/hour, architecture, NVIDIA GPUs
_TABLE: tuple[tuple[str, int, int, int, float, str, int], ...] = (
    ("t3.medium",      2,   4,    17,   0.0416,   "amd64", 0),
    ("t3.large",       2,   8,    35,   0.0832,   "amd64", 0),
    ("t3.xlarge",      4,   16,   58,   0.1664,   "amd64", 0),
    ("t3.2xlarge",     8,   32,   58,   0.3328,   "amd64", 0),
    ("t3a.medium",     2,   4,    17,   0.0376,   "amd64", 0),
    ("t3a.large",      2,   8,    35,   0.0752,   "amd64", 0),
    ("t3a.xlarge",     4,   16,   58,   0.1504,   "amd64", 0),
    ("t3a.2xlarge",    8,   32,   58,   0.3008,   "amd64", 0),
    ("m5.large",       2,   8,    29,   0.096,    "amd64", 0),
    ("m5.xlarge",      4,   16,   58,   0.192,    "amd64", 0),
    ("m5.2xlarge",     8,   32,   58,   0.384,    "amd64", 0),
    ("m5.4xlarge",     16,  64,   234,  0.768,    "amd64", 0),
    ("m5.8xlarge",     32,  128,  234,  1.536,    "amd64", 0),
    ("m5.12xlarge",    48,  192,  234,  2.304,    "amd64", 0),
    ("m5.16xlarge",    64,  256,  737,  3.072,    "amd64", 0),
    ("m5.24xlarge",    96,  384,  737,  4.608,    "amd64", 0),
    ("m6i.large",      2,   8,    29,   0.096,    "amd64", 0),
    ("m6i.xlarge",     4,   16,   58,   0.192,    "amd64", 0),
    ("m6i.2xlarge",    8,   32,   58,   0.384,    "amd64", 0),
    ("m6i.4xlarge",    16,  64,   234,  0.768,    "amd64", 0),
    ("m6i.8xlarge",    32,  128,  234,  1.536,    "amd64", 0),
    ("m6i.12xlarge",   48,  192,  234,  2.304,    "amd64", 0),
    ("m6i.16xlarge",   64,  256,  737,  3.072,    "amd64", 0),
    ("m6i.24xlarge",   96,  384,  737,  4.608,    "amd64", 0),
    ("m6a.large",      2,   8,    29,   0.0864,   "amd64", 0),
    ("m6a.xlarge",     4,   16,   58,   0.1728,   "amd64", 0),
    ("m6a.2xlarge",    8,   32,   58,   0.3456,   "amd64", 0),
    ("m6a.4xlarge",    16,  64,   234,  0.6912,   "amd64", 0),
    ("m6a.8xlarge",    32,  128,  234,  1.3824,   "amd64", 0),
    ("m6a.12xlarge",   48,  192,  234,  2.0736,   "amd64", 0),
    ("m6a.16xlarge",   64,  256,  737,  2.7648,   "amd64", 0),
    ("m6a.24xlarge",   96,  384,  737,  4.1472,   "amd64", 0),
    ("m7i.large",      2,   8,    29,   0.1008,   "amd64", 0),
    ("m7i.xlarge",     4,   16,   58,   0.2016,   "amd64", 0),
    ("m7i.2xlarge",    8,   32,   58,   0.4032,   "amd64", 0),
    ("m7i.4xlarge",    16,  64,   234,  0.8064,   "amd64", 0),
    ("m7i.8xlarge",    32,  128,  234,  1.6128,   "amd64", 0),
    ("m7i.12xlarge",   48,  192,  234,  2.4192,   "amd64", 0),
    ("m7i.16xlarge",   64,  256,  737,  3.2256,   "amd64", 0),
    ("m7i.24xlarge",   96,  384,  737,  4.8384,   "amd64", 0),
    ("m6g.medium",     1,   4,    8,    0.0385,   "arm64", 0),
    ("m6g.large",      2,   8,    29,   0.077,    "arm64", 0),
    ("m6g.xlarge",     4,   16,   58,   0.154,    "arm64", 0),
    ("m6g.2xlarge",    8,   32,   58,   0.308,    "arm64", 0),
    ("m6g.4xlarge",    16,  64,   234,  0.616,    "arm64", 0),
    ("m6g.8xlarge",    32,  128,  234,  1.232,    "arm64", 0),
    ("m6g.12xlarge",   48,  192,  234,  1.848,    "arm64", 0),
    ("m6g.16xlarge",   64,  256,  737,  2.464,    "arm64", 0),
    ("m7g.medium",     1,   4,    8,    0.0408,   "arm64", 0),
    ("m7g.large",      2,   8,    29,   0.0816,   "arm64", 0),
    ("m7g.xlarge",     4,   16,   58,   0.1632,   "arm64", 0),
    ("m7g.2xlarge",    8,   32,   58,   0.3264,   "arm64", 0),
    ("m7g.4xlarge",    16,  64,   234,  0.6528,   "arm64", 0),
    ("m7g.8xlarge",    32,  128,  234,  1.3056,   "arm64", 0),
    ("m7g.12xlarge",   48,  192,  234,  1.9584,   "arm64", 0),
    ("m7g.16xlarge",   64,  256,  737,  2.6112,   "arm64", 0),
    ("c5.large",       2,   4,    29,   0.085,    "amd64", 0),
    ("c5.xlarge",      4,   8,    58,   0.17,     "amd64", 0),
    ("c5.2xlarge",     8,   16,   58,   0.34,     "amd64", 0),
    ("c5.4xlarge",     16,  32,   234,  0.68,     "amd64", 0),
    ("c5.9xlarge",     36,  72,   234,  1.53,     "amd64", 0),
    ("c5.12xlarge",    48,  96,   234,  2.04,     "amd64", 0),
    ("c5.18xlarge",    72,  144,  737,  3.06,     "amd64", 0),
    ("c5.24xlarge",    96,  192,  737,  4.08,     "amd64", 0),
    ("c6i.large",      2,   4,    29,   0.085,    "amd64", 0),
    ("c6i.xlarge",     4,   8,    58,   0.17,     "amd64", 0),
    ("c6i.2xlarge",    8,   16,   58,   0.34,     "amd64", 0),
    ("c6i.4xlarge",    16,  32,   234,  0.68,     "amd64", 0),
    ("c6i.8xlarge",    32,  64,   234,  1.36,     "amd64", 0),
    ("c6i.12xlarge",   48,  96,   234,  2.04,     "amd64", 0),
    ("c6i.16xlarge",   64,  128,  737,  2.72,     "amd64", 0),
    ("c6i.24xlarge",   96,  192,  737,  4.08,     "amd64", 0),
    ("c6a.large",      2,   4,    29,   0.0765,   "amd64", 0),
    ("c6a.xlarge",     4,   8,    58,   0.153,    "amd64", 0),
    ("c6a.2xlarge",    8,   16,   58,   0.306,    "amd64", 0),
    ("c6a.4xlarge",    16,  32,   234,  0.612,    "amd64", 0),
    ("c6a.8xlarge",    32,  64,   234,  1.224,    "amd64", 0),
    ("c6a.12xlarge",   48,  96,   234,  1.836,    "amd64", 0),
    ("c6a.16xlarge",   64,  128,  737,  2.448,    "amd64", 0),
    ("c6a.24xlarge",   96,  192,  737,  3.672,    "amd64", 0),
    ("c7i.large",      2,   4,    29,   0.08925,  "amd64", 0),
    ("c7i.xlarge",     4,   8,    58,   0.1785,   "amd64", 0),
    ("c7i.2xlarge",    8,   16,   58,   0.357,    "amd64", 0),
    ("c7i.4xlarge",    16,  32,   234,  0.714,    "amd64", 0),
    ("c7i.8xlarge",    32,  64,   234,  1.428,    "amd64", 0),
    ("c7i.12xlarge",   48,  96,   234,  2.142,    "amd64", 0),
    ("c7i.16xlarge",   64,  128,  737,  2.856,    "amd64", 0),
    ("c7i.24xlarge",   96,  192,  737,  4.284,    "amd64", 0),
    ("c6g.medium",     1,   2,    8,    0.034,    "arm64", 0),
    ("c6g.large",      2,   4,    29,   0.068,    "arm64", 0),
    ("c6g.xlarge",     4,   8,    58,   0.136,    "arm64", 0),
    ("c6g.2xlarge",    8,   16,   58,   0.272,    "arm64", 0),
    ("c6g.4xlarge",    16,  32,   234,  0.544,    "arm64", 0),
    ("c6g.8xlarge",    32,  64,   234,  1.088,    "arm64", 0),
    ("c6g.12xlarge",   48,  96,   234,  1.632,    "arm64", 0),
    ("c6g.16xlarge",   64,  128,  737,  2.176,    "arm64", 0),
    ("c7g.medium",     1,   2,    8,    0.0363,   "arm64", 0),
    ("c7g.large",      2,   4,    29,   0.0725,   "arm64", 0),
    ("c7g.xlarge",     4,   8,    58,   0.145,    "arm64", 0),
    ("c7g.2xlarge",    8,   16,   58,   0.29,     "arm64", 0),
    ("c7g.4xlarge",    16,  32,   234,  0.58,     "arm64", 0),
    ("c7g.8xlarge",    32,  64,   234,  1.16,     "arm64", 0),
    ("c7g.12xlarge",   48,  96,   234,  1.74,     "arm64", 0),
    ("c7g.16xlarge",   64,  128,  737,  2.32,     "arm64", 0),
    ("r5.large",       2,   16,   29,   0.126,    "amd64", 0),
    ("r5.xlarge",      4,   32,   58,   0.252,    "amd64", 0),
    ("r5.2xlarge",     8,   64,   58,   0.504,    "amd64", 0),
    ("r5.4xlarge",     16,  128,  234,  1.008,    "amd64", 0),
    ("r5.8xlarge",     32,  256,  234,  2.016,    "amd64", 0),
    ("r5.12xlarge",    48,  384,  234,  3.024,    "amd64", 0),
    ("r5.16xlarge",    64,  512,  737,  4.032,    "amd64", 0),
    ("r5.24xlarge",    96,  768,  737,  6.048,    "amd64", 0),
    ("r6i.large",      2,   16,   29,   0.126,    "amd64", 0),
    ("r6i.xlarge",     4,   32,   58,   0.252,    "amd64", 0),
    ("r6i.2xlarge",    8,   64,   58,   0.504,    "amd64", 0),
    ("r6i.4xlarge",    16,  128,  234,  1.008,    "amd64", 0),
    ("r6i.8xlarge",    32,  256,  234,  2.016,    "amd64", 0),
    ("r6i.12xlarge",   48,  384,  234,  3.024,    "amd64", 0),
    ("r6i.16xlarge",   64,  512,  737,  4.032,    "amd64", 0),
    ("r6i.24xlarge",   96,  768,  737,  6.048,    "amd64", 0),
    ("r6a.large",      2,   16,   29,   0.1134,   "amd64", 0),
    ("r6a.xlarge",     4,   32,   58,   0.2268,   "amd64", 0),
    ("r6a.2xlarge",    8,   64,   58,   0.4536,   "amd64", 0),
    ("r6a.4xlarge",    16,  128,  234,  0.9072,   "amd64", 0),
    ("r6a.8xlarge",    32,  256,  234,  1.8144,   "amd64", 0),
    ("r6a.12xlarge",   48,  384,  234,  2.7216,   "amd64", 0),
    ("r6a.16xlarge",   64,  512,  737,  3.6288,   "amd64", 0),
    ("r6a.24xlarge",   96,  768,  737,  5.4432,   "amd64", 0),
    ("r7i.large",      2,   16,   29,   0.1323,   "amd64", 0),
    ("r7i.xlarge",     4,   32,   58,   0.2646,   "amd64", 0),
    ("r7i.2xlarge",    8,   64,   58,   0.5292,   "amd64", 0),
    ("r7i.4xlarge",    16,  128,  234,  1.0584,   "amd64", 0),
    ("r7i.8xlarge",    32,  256,  234,  2.1168,   "amd64", 0),
    ("r7i.12xlarge",   48,  384,  234,  3.1752,   "amd64", 0),
    ("r7i.16xlarge",   64,  512,  737,  4.2336,   "amd64", 0),
    ("r7i.24xlarge",   96,  768,  737,  6.3504,   "amd64", 0),
    ("r6g.medium",     1,   8,    8,    0.0504,   "arm64", 0),
    ("r6g.large",      2,   16,   29,   0.1008,   "arm64", 0),
    ("r6g.xlarge",     4,   32,   58,   0.2016,   "arm64", 0),
    ("r6g.2xlarge",    8,   64,   58,   0.4032,   "arm64", 0),
    ("r6g.4xlarge",    16,  128,  234,  0.8064,   "arm64", 0),
    ("r6g.8xlarge",    32,  256,  234,  1.6128,   "arm64", 0),
    ("r6g.12xlarge",   48,  384,  234,  2.4192,   "arm64", 0),
    ("r6g.16xlarge",   64,  512,  737,  3.2256,   "arm64", 0),
    ("g4dn.xlarge",    4,   16,   29,   0.526,    "amd64", 1),
    ("g4dn.2xlarge",   8,   32,   29,   0.752,    "amd64", 1),
    ("g4dn.4xlarge",   16,  64,   29,   1.204,    "amd64", 1),
    ("g4dn.8xlarge",   32,  128,  58,   2.176,    "amd64", 1),
    ("g4dn.12xlarge",  48,  192,  234,  3.912,    "amd64", 4),
    ("g4dn.16xlarge",  64,  256,  58,   4.352,    "amd64", 1),
    ("g5.xlarge",      4,   16,   58,   1.006,    "amd64", 1),
    ("g5.2xlarge",     8,   32,   58,   1.212,    "amd64", 1),
    ("g5.4xlarge",     16,  64,   234,  1.624,    "amd64", 1),
    ("g5.8xlarge",     32,  128,  234,  2.448,    "amd64", 1),
    ("g5.12xlarge",    48,  192,  737,  5.672,    "amd64", 4),
    ("g5.16xlarge",    64,  256,  234,  4.096,    "amd64", 1),
)
# fmt: on

INSTANCE_TYPES: tuple[InstanceType, ...] = tuple(InstanceType(*row) for row in _TABLE)

_NAME = re.compile(r"^(?P<category>[a-z]+?)(?P<generation>\d+)(?P<attrs>[a-z-]*)\.(?P<size>[0-9a-z]+)$")


def kube_reserved_cpu_millicores(vcpu: int) -> int:
    """Karpenter's default kube-reserved CPU.

    6 % of the first core, 1 % of the second, 0.5 % of cores 3-4 and 0.25 % of every core above 4,
    truncated to whole millicores.
    """
    millis = vcpu * 1000
    reserved = 0.0
    for start, end, fraction in (
        (0, 1000, 0.06),
        (1000, 2000, 0.01),
        (2000, 4000, 0.005),
        (4000, None, 0.0025),
    ):
        if millis <= start:
            break
        top = millis if end is None else min(millis, end)
        reserved += (top - start) * fraction
    return int(reserved)


def kube_reserved_memory_mib(max_pods: int) -> int:
    """Karpenter's default kube-reserved memory: 11 MiB per pod the node can run, plus 255 MiB."""
    return 11 * max_pods + 255


def overhead_memory_mib(max_pods: int) -> int:
    """Memory that pods can never use: kube-reserved plus the hard eviction threshold."""
    return kube_reserved_memory_mib(max_pods) + EVICTION_THRESHOLD_MIB


def _unit_interval(key: str) -> float:
    """A stable number in [0, 1) derived from ``key`` (same on every machine and Python run)."""
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def spot_price(it: InstanceType, zone: str) -> float:
    """A typical spot price: 31-39 % of on-demand per type, moved by up to 1 point per zone."""
    base = SPOT_RATIO_LOW + (SPOT_RATIO_HIGH - SPOT_RATIO_LOW) * _unit_interval(it.name)
    jitter = SPOT_ZONE_JITTER * (2 * _unit_interval(f"{it.name}/{zone}") - 1)
    return max(round(it.on_demand_price * (base + jitter), 4), 0.0001)


def labels(it: InstanceType) -> dict[str, str]:
    """Well-known node labels the type carries (Karpenter AWS provider names), for NodePool requirements."""
    match = _NAME.match(it.name)
    if match is None:
        raise ValueError(f"cannot parse instance type name {it.name!r}")
    family = it.name.split(".", 1)[0]
    out = {
        "node.kubernetes.io/instance-type": it.name,
        "kubernetes.io/arch": it.arch,
        "kubernetes.io/os": "linux",
        "karpenter.k8s.aws/instance-category": match["category"],
        "karpenter.k8s.aws/instance-family": family,
        "karpenter.k8s.aws/instance-generation": match["generation"],
        "karpenter.k8s.aws/instance-size": match["size"],
        "karpenter.k8s.aws/instance-cpu": str(it.vcpu),
        "karpenter.k8s.aws/instance-memory": str(it.memory_gib * 1024),
        "karpenter.k8s.aws/instance-hypervisor": "nitro",
    }
    if it.gpus:
        gpu_name, gpu_memory = GPU_MODELS[family]
        out["karpenter.k8s.aws/instance-gpu-count"] = str(it.gpus)
        out["karpenter.k8s.aws/instance-gpu-manufacturer"] = "nvidia"
        out["karpenter.k8s.aws/instance-gpu-name"] = gpu_name
        out["karpenter.k8s.aws/instance-gpu-memory"] = str(gpu_memory)
    return out


def instance_type_entry(it: InstanceType) -> dict[str, Any]:
    """The catalog entry of one instance type."""
    capacity: dict[str, str] = {"cpu": str(it.vcpu), "memory": f"{it.memory_gib}Gi", "pods": str(it.max_pods)}
    if it.gpus:
        capacity["nvidia.com/gpu"] = str(it.gpus)
    offerings: list[dict[str, Any]] = []
    for zone in ZONES:
        offerings.append(
            {"zone": zone, "capacityType": "on-demand", "price": it.on_demand_price, "available": True}
        )
        offerings.append(
            {"zone": zone, "capacityType": "spot", "price": spot_price(it, zone), "available": True}
        )
    entry: dict[str, Any] = {"name": it.name, "labels": labels(it)}
    if it.arch == "amd64":  # Windows Server AMIs run on x86 types, not on Graviton (priced here as Linux)
        entry["operatingSystems"] = ["linux", "windows"]
    return {
        **entry,
        "capacity": capacity,
        "overhead": {
            "cpu": f"{kube_reserved_cpu_millicores(it.vcpu)}m",
            "memory": f"{overhead_memory_mib(it.max_pods)}Mi",
        },
        "offerings": offerings,
    }


def catalog() -> dict[str, Any]:
    """The whole ``InstanceTypeCatalog`` document."""
    return {
        "apiVersion": "ebb.sh/v1",
        "kind": "InstanceTypeCatalog",
        "metadata": {
            "name": CATALOG_NAME,
            "annotations": {
                "ebb.sh/region": REGION,
                "ebb.sh/prices-as-of": PRICES_AS_OF,
                "ebb.sh/price-source": (
                    "on-demand: us-east-1 Linux on-demand hourly list prices as recorded for "
                    f"{PRICES_AS_OF}; spot: synthetic, 30-40% of on-demand. For planning only."
                ),
                "ebb.sh/generated-by": "libs/ebb/src/ebb/data/make_aws_catalog.py",
            },
        },
        "spec": {"instanceTypes": [instance_type_entry(it) for it in INSTANCE_TYPES]},
    }


HEADER = (
    "# ebb's bundled instance-type catalog (AWS us-east-1). GENERATED by make_aws_catalog.py: do not edit,\n"
    "# change the table in the generator and run it again. Prices are list prices for planning only.\n"
)


def render() -> str:
    """The YAML text of the catalog, exactly as written to ``OUTPUT``."""
    return HEADER + yaml.safe_dump(catalog(), sort_keys=False, default_flow_style=False, width=120)


def main(argv: list[str] | None = None) -> int:
    """Write the catalog (or, with ``--check``, report whether the written one is current)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if the YAML file differs from the table")
    parser.add_argument(
        "-o", "--output", type=Path, default=OUTPUT, help="where to write (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: run {Path(__file__).name} again", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {len(INSTANCE_TYPES)} instance types to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
