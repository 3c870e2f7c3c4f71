"""ebb interruption-ingester service (docs/architecture.md): long-polls the EventBridge
interruption queue on SQS, turns spot interruption warnings, scheduled changes, stopping/terminating
state changes and rebalance recommendations into ``Interruption`` messages on ``ebb.interruptions``
(keyed by node), then deletes each SQS message. ``python -m ebb_interruption_ingester``."""
