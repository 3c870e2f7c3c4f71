"""moto server: SQS (the interruption queue) and EC2 through aiobotocore."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from aiobotocore.session import get_session

from tests.kit.servers import AwsEndpoint

pytestmark = pytest.mark.integration


def _client_args(aws: AwsEndpoint) -> dict[str, Any]:
    return {
        "endpoint_url": aws.endpoint_url,
        "region_name": aws.region,
        "aws_access_key_id": aws.access_key_id,
        "aws_secret_access_key": aws.secret_access_key,
    }


async def test_sqs_send_receive(aws_endpoint: AwsEndpoint) -> None:
    body = {
        "version": "0",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "detail": {"instance-id": "i-0123456789abcdef0", "instance-action": "terminate"},
    }
    async with get_session().create_client("sqs", **_client_args(aws_endpoint)) as sqs:
        queue_url = (await sqs.create_queue(QueueName=f"ebb-smoke-{uuid.uuid4().hex[:8]}"))["QueueUrl"]
        await sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(body))
        received = await sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=1, WaitTimeSeconds=5)
        messages = received.get("Messages", [])
        assert len(messages) == 1
        assert json.loads(messages[0]["Body"]) == body
        await sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=messages[0]["ReceiptHandle"])
        again = await sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=1, WaitTimeSeconds=0)
        assert again.get("Messages", []) == []
        await sqs.delete_queue(QueueUrl=queue_url)


async def test_ec2_run_and_terminate(aws_endpoint: AwsEndpoint) -> None:
    async with get_session().create_client("ec2", **_client_args(aws_endpoint)) as ec2:
        images = await ec2.describe_images(Owners=["amazon"])
        image_id = images["Images"][0]["ImageId"]
        run = await ec2.run_instances(ImageId=image_id, InstanceType="m5.large", MinCount=1, MaxCount=1)
        instance_id = run["Instances"][0]["InstanceId"]
        await ec2.terminate_instances(InstanceIds=[instance_id])
        described = await ec2.describe_instances(InstanceIds=[instance_id])
        state = described["Reservations"][0]["Instances"][0]["State"]["Name"]
        assert state in {"shutting-down", "terminated"}
