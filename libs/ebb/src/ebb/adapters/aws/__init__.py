"""AWS adapters: the EventBridge interruption messages as delivered on SQS (``eventbridge``, pure: a
parser, no I/O) and the SQS queue client on aiobotocore (``sqs``)."""

from ebb.adapters.aws.eventbridge import (
    Ignored,
    IgnoredReason,
    Notice,
    instance_id_of_provider_id,
    parse_message,
)

__all__ = ["Ignored", "IgnoredReason", "Notice", "instance_id_of_provider_id", "parse_message"]
