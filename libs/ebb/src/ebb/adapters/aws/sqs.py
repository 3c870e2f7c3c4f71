"""The interruption queue on SQS through aiobotocore.

``sqs_client(...)`` opens an aiobotocore SQS client (credentials from the default chain: environment,
web identity / IRSA, instance profile; ``endpoint_url`` for moto). ``SqsQueue`` wraps the three calls
the ingester needs: long-poll ``receive``, ``delete`` and resolving a queue name to its URL.
``Backoff`` (``ebb.adapters.backoff``) is the exponential backoff with jitter used after a failed call.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

#: SQS allows at most 10 messages per receive and 20 s of long polling
MAX_MESSAGES = 10
MAX_WAIT_SECONDS = 20


class SqsClient(Protocol):
    """The part of an aiobotocore SQS client the ingester calls (keyword arguments as in boto3)."""

    async def receive_message(self, **kwargs: Any) -> dict[str, Any]: ...

    async def delete_message(self, **kwargs: Any) -> dict[str, Any]: ...

    async def get_queue_url(self, **kwargs: Any) -> dict[str, Any]: ...

    async def get_queue_attributes(self, **kwargs: Any) -> dict[str, Any]: ...


@dataclass(frozen=True)
class SqsMessage:
    message_id: str
    receipt_handle: str
    body: str


class SqsQueue:
    """One SQS queue: long-poll receive and delete."""

    def __init__(self, client: SqsClient, url: str, *, wait_time_seconds: int = MAX_WAIT_SECONDS,
                 max_messages: int = MAX_MESSAGES, visibility_timeout: int | None = None) -> None:
        if not 0 <= wait_time_seconds <= MAX_WAIT_SECONDS:
            raise ValueError(f"wait_time_seconds must be within 0..{MAX_WAIT_SECONDS}")
        if not 1 <= max_messages <= MAX_MESSAGES:
            raise ValueError(f"max_messages must be within 1..{MAX_MESSAGES}")
        self.client = client
        self.url = url
        self.wait_time_seconds = wait_time_seconds
        self.max_messages = max_messages
        self.visibility_timeout = visibility_timeout

    @classmethod
    async def named(cls, client: SqsClient, name: str, **options: Any) -> SqsQueue:
        """The queue called ``name`` (its URL looked up with GetQueueUrl)."""
        url = (await client.get_queue_url(QueueName=name))["QueueUrl"]
        return cls(client, str(url), **options)

    async def ping(self) -> None:
        """Raise unless SQS answers for the queue (GetQueueAttributes): the ingester's readiness probe."""
        await self.client.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])

    async def receive(self) -> list[SqsMessage]:
        """Up to ``max_messages`` messages, waiting up to ``wait_time_seconds`` for the first."""
        request: dict[str, Any] = {
            "QueueUrl": self.url,
            "MaxNumberOfMessages": self.max_messages,
            "WaitTimeSeconds": self.wait_time_seconds,
        }
        if self.visibility_timeout is not None:
            request["VisibilityTimeout"] = self.visibility_timeout
        response = await self.client.receive_message(**request)
        return [
            SqsMessage(str(m.get("MessageId", "")), str(m["ReceiptHandle"]), str(m.get("Body", "")))
            for m in response.get("Messages", [])
        ]

    async def delete(self, message: SqsMessage) -> None:
        await self.client.delete_message(QueueUrl=self.url, ReceiptHandle=message.receipt_handle)


@contextlib.asynccontextmanager
async def sqs_client(region: str, *, endpoint_url: str = "", read_timeout: float = 60.0) -> AsyncIterator[Any]:
    """An aiobotocore SQS client for ``region`` (``endpoint_url``: e.g. a moto server)."""
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session

    config = AioConfig(read_timeout=read_timeout, connect_timeout=10, retries={"max_attempts": 3, "mode": "standard"})
    async with get_session().create_client(
        "sqs", region_name=region, endpoint_url=endpoint_url or None, config=config
    ) as client:
        yield client
