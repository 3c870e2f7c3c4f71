"""The message bus: one interface, ``Bus`` (publish, consume from the committed or given offsets, end offsets,
compacted reads); ``KafkaBus`` in the distributed mode, ``InMemoryBus`` in the embedded mode, with the same
delivery semantics (``base``), checked by one shared test suite (tests/kit/bus_conformance.py).

``KafkaBus`` is imported when first named (``__getattr__``): aiokafka is in the ``kafka`` extra of the ``ebb-core``
distribution, and the embedded mode, which runs on the in-memory bus, is installed without it."""

from typing import TYPE_CHECKING, Any

from ebb.adapters.bus.base import (
    Bus,
    Delivery,
    Handler,
    HandlerFailed,
    Offsets,
    Outcome,
    PoisonMessage,
    RawRecord,
    RetryPolicy,
)
from ebb.adapters.bus.memory import BusError, InMemoryBus

__all__ = [
    "Bus",
    "BusError",
    "Delivery",
    "Handler",
    "HandlerFailed",
    "InMemoryBus",
    "KafkaBus",
    "Offsets",
    "Outcome",
    "PoisonMessage",
    "RawRecord",
    "RetryPolicy",
]

if TYPE_CHECKING:  # both implementations satisfy the protocol (checked by mypy)
    from ebb.adapters.bus.kafka import KafkaBus

    _memory: Bus = InMemoryBus()
    _kafka: Bus = KafkaBus("localhost:9092")


def __getattr__(name: str) -> Any:
    if name == "KafkaBus":
        from ebb.adapters.bus.kafka import KafkaBus

        return KafkaBus
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
