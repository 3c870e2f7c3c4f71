"""EventBridge events as the interruption-ingester's parser reads them (ebb.adapters.aws.eventbridge): a builder
and a spot interruption warning and a scheduled AWS Health event about two instances. Shared by the parser's
tests and the fuzzing of the ingester's records."""

from __future__ import annotations

from typing import Any

#: the instances the events name
I1, I2 = "i-0123456789abcdef0", "i-0fedcba9876543210"


def event(detail_type: str, detail: Any, source: str = "aws.ec2", **extra: Any) -> dict[str, Any]:
    return {
        "version": "0", "id": "7bf73129-1428-4cd3-a780-95db273d1602", "detail-type": detail_type,
        "source": source, "account": "123456789012", "time": "2026-11-21T13:00:00Z", "region": "us-east-1",
        "resources": [f"arn:aws:ec2:us-east-1:123456789012:instance/{I1}"], "detail": detail, **extra,
    }


SPOT = event("EC2 Spot Instance Interruption Warning", {"instance-id": I1, "instance-action": "terminate"})
HEALTH = event("AWS Health Event", {
    "eventArn": "arn:aws:health:us-east-1::event/EC2/x", "service": "EC2",
    "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", "eventTypeCategory": "scheduledChange",
    "startTime": "Sat, 21 Nov 2026 15:30:00 GMT",
    "affectedEntities": [{"entityValue": I1}, {"entityValue": "vol-0123"}, {"entityValue": I2}, {"entityValue": I1}],
}, source="aws.health")
