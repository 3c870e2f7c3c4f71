"""Instance types as Karpenter's KWOK provider's instance_types.json has them, for the calibration's tests: the
peer harness's three families (c, s, m: 2, 4, 8 GiB per vCPU) at 2, 4 and 8 vCPUs, on-demand in every zone."""

from __future__ import annotations

from typing import Any

from bench import peer


def kwok_type(cpu: int, gib_per_cpu: int, price: float) -> dict[str, Any]:
    """One instance type as Karpenter's KWOK provider's instance_types.json has it."""
    family = {2: "c", 4: "s", 8: "m"}[gib_per_cpu]
    return {"name": f"{family}-{cpu}x-amd64-linux", "architecture": "amd64", "operatingSystems": ["linux"],
            "resources": {"cpu": str(cpu), "memory": f"{cpu * gib_per_cpu}Gi", "pods": "110"},
            "offerings": [{"Price": price, "Available": True, "Requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}
                for zone in peer.ZONES]}


TYPES = [kwok_type(cpu, gib, round(0.025 * cpu * (1 + gib / 8), 4)) for cpu in (2, 4, 8) for gib in (2, 4, 8)]
