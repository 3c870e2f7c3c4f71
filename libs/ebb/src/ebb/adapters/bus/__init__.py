"""The message bus (DESIGN §1-§2): one interface, ``Bus``; ``KafkaBus`` in the distributed mode,
``InMemoryBus`` in the embedded mode, with the same delivery semantics (``base``)."""

from typing import TYPE_CHECKING

from ebb.adapters.bus.base import (
    Bus,
    Delivery,
    Handler,
    HandlerFailed,
    Outcome,
    PoisonMessage,
    RawRecord,
    RetryPolicy,
)
from ebb.adapters.bus.kafka import KafkaBus
from ebb.adapters.bus.memory import BusError, InMemoryBus
from ebb.adapters.bus.offsets import end_offsets, skipping_before

__all__ = [
    "Bus",
    "BusError",
    "Delivery",
    "Handler",
    "HandlerFailed",
    "InMemoryBus",
    "KafkaBus",
    "Outcome",
    "PoisonMessage",
    "RawRecord",
    "RetryPolicy",
    "end_offsets",
    "skipping_before",
]

if TYPE_CHECKING:  # both implementations satisfy the protocol (checked by mypy)
    _memory: Bus = InMemoryBus()
    _kafka: Bus = KafkaBus("localhost:9092")
