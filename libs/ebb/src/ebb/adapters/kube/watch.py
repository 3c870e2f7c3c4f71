"""List+watch with kubernetes-asyncio (docs/architecture.md#shape): one loop per kind, each independent of the others.

Per kind: list (paginated) → publish the differences (``KindState.relist``) → watch from the list's
resourceVersion with ``allowWatchBookmarks`` and a server-side timeout → when the server ends the
stream, watch again from the last resourceVersion seen (object or bookmark). ``410 Gone`` (on the
watch or an expired list continue token) → relist, which also publishes tombstones for objects that
vanished meanwhile. Any other error → exponential backoff with jitter (``ebb.adapters.backoff``, on the
watcher's clock; a list or a watch that succeeds starts the attempts again; the kind is in ``failing``, and
``on_failing`` told, until the apiserver answers its list or watch again), then resume (watch from the last
resourceVersion, or relist when there is none). A custom kind whose CRD is not installed (404) is
logged as a warning and retried every ``missing_kind_retry`` seconds without affecting the other kinds.
Setting ``stop`` ends every loop between two reads (and cuts a backoff wait short); a change being published
is finished first.

Changes go to the sink in batches: the watch events of one read from the stream (a list: ``batch_size`` changes
at a time), so the bus has a batch in flight instead of one record per round trip. What a batch changes is
recorded in the ``KindState`` (digests, resourceVersion) only after the sink returned, i.e. after the bus
acknowledged every record of it; a sink that fails ends the step before anything is recorded, and the retry
watches again from the resourceVersion before the batch (or relists), publishing it again (at least once).

Objects are read as the raw JSON the API server sends (``_preload_content=False``), so they are already
kubectl-shaped dicts with camelCase keys, for typed kinds and custom objects alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import orjson
from tenacity import RetryCallState, retry_if_not_exception_type

from ebb.adapters.backoff import Backoff
from ebb.adapters.clock import Clock, Stopped, unless_stopped
from ebb.adapters.kube.kinds import KindSpec
from ebb.adapters.kube.paging import PAGE_SIZE, page_options, pages
from ebb.adapters.kube.reflector import Change, KindState

log = logging.getLogger("ebb.kube")

#: publishes a batch of changes in order and returns once all of them are acknowledged
Sink = Callable[[Sequence[Change]], Awaitable[None]]

#: changes of a list handed to the sink at a time
LIST_BATCH = 500


class WatchError(RuntimeError):
    """The API server answered with an error status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Gone(WatchError):
    """410: the resourceVersion (or continue token) is too old; relist."""


class KindMissing(WatchError):
    """404 on a custom kind's list: its CRD is not installed."""


#: the watch loop's default: retried sooner and capped lower than a cloud API's. Capped at 10 s: a kind whose
#: watch is in backoff is stale, and after an apiserver restart a 30 s cap left the pods stale for 20 s more
#: while the nodes were current again (seen in the chaos run)
WATCH_BACKOFF = Backoff(initial=0.5, maximum=10.0)


def status_message(body: str) -> str:
    """The ``message`` of an apiserver's error body (a Status), or the body itself when it has none."""
    with contextlib.suppress(ValueError, AttributeError):
        return str(json.loads(body).get("message") or body)
    return body


def _status_error(status: int, body: str, spec: KindSpec) -> WatchError:
    message = status_message(body)
    if status == 410:
        return Gone(status, message)
    if status == 404 and spec.custom:
        return KindMissing(status, message)
    return WatchError(status, message)


def decode_json(line: bytes) -> Any:
    """One watch event line: orjson (twice as fast as the stdlib), the stdlib for what only it accepts (NaN,
    Infinity). The API server's integers are int64 (Go), which orjson keeps exact; it would make a float of an
    integer beyond 64 bits."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


def split_lines(buffer: bytes, chunk: bytes) -> tuple[list[bytes], bytes]:
    """Complete lines of ``buffer + chunk`` and the incomplete rest (watch events are one JSON per line)."""
    data = buffer + chunk
    *lines, rest = data.split(b"\n")
    return [line for line in lines if line.strip()], rest


class KubeWatcher:
    """Lists and watches ``kinds`` and hands every change to ``sink`` (in order per kind)."""

    def __init__(
        self,
        api_client: Any,
        kinds: Iterable[KindSpec],
        sink: Sink,
        *,
        watch_timeout: int = 300,
        missing_kind_retry: float = 30.0,
        backoff: Backoff | None = None,
        page_size: int = PAGE_SIZE,
        batch_size: int = LIST_BATCH,
        lister: Callable[[KindSpec], Callable[..., Awaitable[Any]]] | None = None,
        clock: Clock | None = None,
        on_failing: Callable[[Mapping[str, str]], None] | None = None,
        on_synced: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.api_client = api_client
        #: the list/watch function of a kind (``KindSpec.list_function`` unless replaced, e.g. by a test)
        self.lister = lister or (lambda spec: spec.list_function(api_client))
        self.kinds = tuple(kinds)
        self.sink = sink
        self.watch_timeout = watch_timeout
        self.missing_kind_retry = missing_kind_retry
        self.backoff = backoff or WATCH_BACKOFF
        self.page_size = page_size
        self.batch_size = batch_size
        #: times the backoff and the missing-CRD retry
        self.clock = clock or Clock()
        self.states = {spec.kind: KindState(spec) for spec in self.kinds}
        #: set once a kind's first list has been published
        self.synced = {spec.kind: asyncio.Event() for spec in self.kinds}
        #: kind -> why its list/watch is failing (in backoff), until the apiserver answers it again: what it
        #: publishes of that kind may be stale meanwhile
        self.failing: dict[str, str] = {}
        #: told ``failing`` whenever it changes (the cluster-watcher's readiness)
        self.on_failing = on_failing
        #: awaited with a kind once its first list is published, or once the apiserver says it does not serve the
        #: kind (it has no objects then), before the kind is marked ``synced`` (the cluster-watcher's `KindSynced`)
        self.on_synced = on_synced
        #: the kinds ``on_synced`` was told of in this run
        self._told_synced: set[str] = set()

    def seed(self, kind: str, namespace: str, name: str, trimmed: Mapping[str, Any]) -> bool:
        """Note an object published before (e.g. read back from the compacted topic after a restart), so
        that the first list tombstones it if it is gone and skips it if it is unchanged. False for a
        kind that is not watched."""
        state = self.states.get(kind)
        if state is None:
            return False
        state.record(Change(kind, namespace, name, "", dict(trimmed)))
        return True

    async def run(self, stop: asyncio.Event) -> None:
        """Run every kind's loop until ``stop`` is set."""
        tasks = [asyncio.create_task(self.run_kind(spec, stop), name=f"watch-{spec.kind}") for spec in self.kinds]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def run_kind(self, spec: KindSpec, stop: asyncio.Event) -> None:
        state = self.states[spec.kind]
        missing_reported = False

        def retrying_in(attempt: RetryCallState) -> None:
            error = attempt.outcome.exception() if attempt.outcome else None
            log.warning("%s: list/watch failed (attempt %d), retrying in %.2fs: %r", spec.kind,
                        attempt.attempt_number, attempt.upcoming_sleep, error)
            self._failing(spec.kind, f"list/watch failed {attempt.attempt_number} times, the last with "
                                     f"{error!r}"[:300])

        while not stop.is_set():
            try:
                # one step, a list or a watch, retried with backoff; a step that succeeds starts the attempts again
                async for attempt in self.backoff.retrying(
                        self.clock, stop, retry=retry_if_not_exception_type((Stopped, Gone, KindMissing)),
                        before_sleep=retrying_in):
                    with attempt:
                        if state.resource_version is None:
                            await self._list(spec, state, stop)
                            await self._mark_synced(spec.kind)
                            if missing_reported:
                                log.info("%s: its CRD is installed now; watching", spec.kind)
                                missing_reported = False
                        else:
                            await self._mark_synced(spec.kind)  # a marker whose publishing failed after the list
                            await self._watch(spec, state, stop)
            except Stopped:
                return
            except Gone as e:
                log.info("%s: resourceVersion %s expired (%s); relisting", spec.kind, state.resource_version, e)
                state.resource_version = None
            except KindMissing as e:
                self._failing(spec.kind, None)  # the apiserver answers: the kind is not served, which is no failure
                try:
                    # none of it exists: what was published of it before (its CRD removed since) goes, and a view
                    # without any is whole
                    await self._publish_gone(spec, state)
                    await self._mark_synced(spec.kind, listed=False)
                except Exception as error:  # published at the next try
                    log.warning("%s: could not publish that the kind is not served: %r", spec.kind, error)
                if not missing_reported:
                    log.warning("%s: %s/%s is not served (CRD not installed?): %s; retrying every %.0fs",
                                spec.kind, spec.api_version, spec.plural, e, self.missing_kind_retry)
                    missing_reported = True
                state.resource_version = None
                await self.clock.sleep(self.missing_kind_retry, stop)

    async def _publish_gone(self, spec: KindSpec, state: KindState) -> None:
        """A tombstone of every object of the kind published before, now that the apiserver does not serve it."""
        changes = state.relist([])
        await self._publish_recorded(state, changes)
        if changes:
            log.info("%s: not served any more; published %d tombstones", spec.kind, len(changes))

    async def _publish_recorded(self, state: KindState, changes: Sequence[Change]) -> None:
        """Hand ``changes`` to the sink a batch at a time, each recorded as published once the sink took it."""
        for start in range(0, len(changes), self.batch_size):
            batch = changes[start:start + self.batch_size]
            await self.sink(batch)
            for change in batch:
                state.record(change)

    async def _mark_synced(self, kind: str, *, listed: bool = True) -> None:
        """Tell ``on_synced`` of the kind, the first time in this run; then, when its first list was published
        (``listed``; not a kind the apiserver does not serve), mark it ``synced``."""
        if kind not in self._told_synced:
            if self.on_synced is not None:
                await self.on_synced(kind)
            self._told_synced.add(kind)
        if listed:
            self.synced[kind].set()

    async def _request(self, spec: KindSpec, stop: asyncio.Event, **kwargs: Any) -> Any:
        """The raw aiohttp response of a list or watch call; WatchError on an error status."""
        call = self.lister(spec)
        response = await unless_stopped(call(_preload_content=False, **kwargs), stop)
        if not 200 <= response.status <= 299:
            try:
                body = (await response.read()).decode("utf-8", "replace")
            finally:
                response.release()
            raise _status_error(response.status, body, spec)
        self._failing(spec.kind, None)
        return response

    def _failing(self, kind: str, why: str | None) -> None:
        """Note that ``kind``'s list/watch fails (``why``) or, None, is answered again; tell ``on_failing``."""
        if why is None and kind not in self.failing:
            return
        if why is None:
            del self.failing[kind]
        else:
            self.failing[kind] = why
        if self.on_failing is not None:
            self.on_failing(dict(self.failing))

    async def _list(self, spec: KindSpec, state: KindState, stop: asyncio.Event) -> None:
        items: list[Mapping[str, Any]] = []
        version: str | None = None

        async def fetch(token: str | None) -> Mapping[str, Any]:
            response = await self._request(spec, stop, **page_options(token, limit=self.page_size,
                                                                      _request_timeout=(10, 60)))
            try:
                page: Mapping[str, Any] = decode_json(await unless_stopped(response.read(), stop))
            finally:
                response.release()
            return page

        async for page in pages(fetch):
            version = version or str((page.get("metadata") or {}).get("resourceVersion") or "")
            items.extend(page.get("items") or [])
        changes = state.relist(items)
        await self._publish_recorded(state, changes)
        state.resource_version = version or None
        log.info("%s: listed %d objects at resourceVersion %s, published %d changes",
                 spec.kind, len(items), version, len(changes))

    async def _watch(self, spec: KindSpec, state: KindState, stop: asyncio.Event) -> None:
        """Watch from ``state.resource_version`` until the server ends the stream."""
        response = await self._request(
            spec,
            stop,
            watch=True,
            resource_version=state.resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=self.watch_timeout,
            _request_timeout=(10, self.watch_timeout + 30),
        )
        try:
            buffer = b""
            while True:
                chunk = await unless_stopped(response.content.readany(), stop)
                if not chunk:
                    return  # the server's timeout: watch again from the last resourceVersion
                lines, buffer = split_lines(buffer, chunk)
                await self._events(spec, state, [decode_json(line) for line in lines])
        finally:
            response.close()  # a watch connection is never reused (it may be cut mid-stream)

    async def _events(self, spec: KindSpec, state: KindState, events: Sequence[Mapping[str, Any]]) -> None:
        """Publish the changes of consecutive watch events as one batch, then record them and move the
        resourceVersion past them. An ERROR event ends the stream after the events before it are published."""
        error: WatchError | None = None
        typed: list[tuple[str, Mapping[str, Any]]] = []
        version: str | None = None
        for event in events:
            type_ = str(event.get("type") or "")
            obj = event.get("object") or {}
            if type_ == "ERROR":
                error = _status_error(int(obj.get("code") or 500), json.dumps(obj), spec)
                break
            typed.append((type_, obj))
            version = str((obj.get("metadata") or {}).get("resourceVersion") or "") or version
        changes = state.batch(typed)
        if changes:
            await self.sink(changes)
            for change in changes:
                state.record(change)
        if version:
            state.resource_version = version
        if error is not None:
            raise error
