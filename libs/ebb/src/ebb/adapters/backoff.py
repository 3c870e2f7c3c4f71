"""Exponential backoff with jitter, for the adapters that retry a failed call (the Kubernetes watch loop,
the SQS long poll). The drainer's eviction backoff has no jitter and lives with it (``kube.drain``)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter: attempt n waits a uniform share in [1 - jitter, 1] of
    ``min(maximum, initial * multiplier ** (n - 1))``."""

    initial: float = 1.0
    multiplier: float = 2.0
    maximum: float = 60.0
    jitter: float = 0.5

    def delay(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        base = min(self.maximum, self.initial * self.multiplier ** max(0, attempt - 1))
        return float(base * (1.0 - self.jitter * rng()))
