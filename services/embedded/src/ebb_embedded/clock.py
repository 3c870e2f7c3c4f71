"""Simulated time for the embedded mode: a clock that runs ``speed`` times faster than the wall clock.

Every service takes its notion of "now" from an injected clock, so the embedded mode hands them this one;
the services' own waits (debounce, pass interval, validation delay, eviction backoff) are real seconds and
are scaled by ``real()`` when the embedded settings are built, so a 15 s validation delay stays 15
simulated seconds at any speed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta


class SimClock:
    """``start`` at the moment it is made, then ``speed`` simulated seconds per real second."""

    def __init__(self, start: datetime, speed: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        if start.tzinfo is None:
            raise ValueError("the simulated start time must be timezone-aware")
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.start = start
        self.speed = speed
        self._monotonic = monotonic
        self._t0 = monotonic()

    def restart(self) -> None:
        """Make "now" the start again (after the set-up, so it costs no simulated time)."""
        self._t0 = self._monotonic()

    def __call__(self) -> datetime:
        return self.start + timedelta(seconds=(self._monotonic() - self._t0) * self.speed)

    def elapsed(self) -> timedelta:
        """Simulated time since the start."""
        return self() - self.start

    def real(self, simulated_seconds: float) -> float:
        """The real seconds that ``simulated_seconds`` take at this speed."""
        return simulated_seconds / self.speed
