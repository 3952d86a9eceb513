"""broker/service/inbox.py in process, on the memory store: what the inbox sockets are told.

A watcher is the service's view of an inbox socket (frames land in a list). Writes "from
another process" are made on the store directly, as another broker would; a lost notice is
a write made while the store's notice handler is switched off.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from broker.core import machine
from broker.core.machine import Questionnaire
from broker.runtime.config import Config
from broker.service import Broker, Encoded
from broker.service import inbox as inbox_module
from broker.store.base import Notice, Record
from tests.helpers.samples import new_sid
from tests.helpers.waiting import eventually
from tests.unit.test_service_fanout import QUESTIONS, CountingStore

NOW = 1_700_000_000.0


class Watcher:
    """An inbox socket as the feed sees it."""

    def __init__(self, scope: str) -> None:
        self.client_id = uuid.uuid4().hex[:8]
        self.scope = scope
        self.ready = False
        self.frames: list[dict[str, Any]] = []

    def deliver(self, *frames: Encoded) -> None:
        self.frames.extend(frame.frame for frame in frames)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [frame for frame in self.frames if frame["type"] == kind]


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    started = Broker(Config(secret="s" * 32), CountingStore(), clock=lambda: NOW)
    await started.start()
    try:
        yield started
    finally:
        await started.stop()


def tenant() -> str:
    return new_sid("tenant") + ":"


async def created(broker: Broker, sid: str) -> Questionnaire:
    return await broker.store.create(machine.start(uuid.uuid4().hex, sid, QUESTIONS, NOW))


async def written(broker: Broker, state: Questionnaire, command: machine.Command) -> Questionnaire:
    new = machine.apply(state, command, NOW + 1)
    assert await broker.store.compare_and_set(new, state.version)
    return new


def answer(state: Questionnaire) -> machine.AnswerQuestion:
    question = state.current_question
    assert question is not None
    return machine.AnswerQuestion(state.id, state.step, question.id, (question.option_ids[0],))


async def watching(broker: Broker, scope: str) -> Watcher:
    watcher = Watcher(scope)
    await broker.inbox.watch(watcher)
    return watcher


async def test_the_list_comes_first_then_the_changes(broker: Broker) -> None:
    prefix = tenant()
    first = await created(broker, prefix + "a")
    watcher = await watching(broker, prefix + "*")
    second = await created(broker, prefix + "b")
    await written(broker, first, answer(first))

    await eventually(lambda: len(watcher.frames) == 3, what="the list and two changes")
    kinds = [frame["type"] for frame in watcher.frames]
    assert kinds == ["inbox", "inbox_item", "inbox_item"]
    assert [item["questionnaireId"] for item in watcher.frames[0]["items"]] == [first.id]
    assert {frame["item"]["questionnaireId"] for frame in watcher.frames[1:]} == {first.id, second.id}


async def test_a_draft_tells_nothing(broker: Broker) -> None:
    prefix = tenant()
    state = await created(broker, prefix + "a")
    watcher = await watching(broker, prefix + "*")
    drafted = await written(broker, state, machine.Draft(state.id, 0, ("staging",)))
    await written(broker, drafted, answer(drafted))
    await eventually(lambda: watcher.of("inbox_item"), what="the answer's item")
    assert [frame["type"] for frame in watcher.frames] == ["inbox", "inbox_item"]


async def test_a_late_notice_of_an_ended_questionnaire_does_not_bring_it_back(broker: Broker) -> None:
    prefix = tenant()
    state = await created(broker, prefix + "a")
    watcher = await watching(broker, prefix + "*")
    ended = await written(broker, state, machine.Cancel(state.id, 0))
    await eventually(lambda: watcher.of("inbox_removed"), what="the removal")
    followed = broker.inbox.sessions[prefix + "a"]

    # The create's notice once more, as the watch's channel may bring it after the end:
    followed.seq = 0  # (even were the write numbers no help)
    await broker.inbox.on_notice(Notice(state.session_id, state.id, 0, state.status, 1, Record.of(state)))

    assert watcher.of("inbox_item") == []
    assert followed.entries == {}
    assert ended.status == "cancelled"


async def test_a_gap_in_the_write_numbers_reads_the_session_again(broker: Broker) -> None:
    prefix = tenant()
    store = broker.store
    assert isinstance(store, CountingStore)
    first = await created(broker, prefix + "a")
    watcher = await watching(broker, prefix + "*")
    with store.silently():  # a write whose notice is lost
        second = await created(broker, prefix + "a")
    await written(broker, first, answer(first))  # the next notice: a number is missing

    await eventually(lambda: second.id in {f["item"]["questionnaireId"] for f in watcher.of("inbox_item")})
    assert broker.metrics.inbox_rereads.value >= 1


async def test_a_missed_last_write_is_caught_by_the_reconciliation(broker: Broker) -> None:
    prefix = tenant()
    store = broker.store
    assert isinstance(store, CountingStore)
    state = await created(broker, prefix + "a")
    watcher = await watching(broker, prefix + "*")
    with store.silently():
        await written(broker, state, machine.Cancel(state.id, 0))
    await asyncio.sleep(0)
    assert watcher.of("inbox_removed") == []

    await broker.inbox.reconcile()

    assert watcher.of("inbox_removed") == [
        {
            "type": "inbox_removed",
            "sessionId": prefix + "a",
            "questionnaireId": state.id,
            "status": "cancelled",
            "cancellationReason": "user_cancelled",
        }
    ]


async def test_presence_changes_reach_the_items_of_the_session(broker: Broker) -> None:
    prefix = tenant()
    state = await created(broker, prefix + "a")
    watcher = await watching(broker, prefix + "*")
    await broker.store.heartbeat(prefix + "a", "c-1", 15, NOW)
    await eventually(lambda: watcher.of("inbox_item"), what="the count")
    assert watcher.of("inbox_item")[-1]["item"]["clients"] == 1
    await broker.inbox.on_presence(prefix + "a", 1)  # the same count again: nothing to tell
    assert len(watcher.of("inbox_item")) == 1
    assert watcher.of("inbox_item")[0]["item"]["questionnaireId"] == state.id


async def test_a_session_outside_the_scope_is_not_followed(broker: Broker) -> None:
    prefix = tenant()
    watcher = await watching(broker, prefix + "mine")
    await created(broker, prefix + "other")
    await created(broker, tenant() + "mine")
    await asyncio.sleep(0.01)
    assert watcher.frames == [{"type": "inbox", "items": []}]
    assert set(broker.inbox.sessions) <= {prefix + "mine"}


async def test_sessions_nobody_needs_are_dropped_after_a_while(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inbox_module, "FOLLOW_LINGER", 0.0)
    prefix = tenant()
    kept = await created(broker, prefix + "kept")
    gone = await created(broker, prefix + "gone")
    watcher = await watching(broker, prefix + "*")
    await written(broker, gone, machine.Cancel(gone.id, 0))
    await eventually(lambda: watcher.of("inbox_removed"), what="the removal")

    await broker.inbox.reconcile()

    assert set(broker.inbox.sessions) == {prefix + "kept"}
    assert broker.hubs[prefix + "kept"].watchers == 1
    await broker.inbox.unwatch(watcher)
    await broker.inbox.reconcile()
    assert broker.inbox.sessions == {}
    assert broker.metrics.inbox_sessions.value == 0 and broker.metrics.inbox_connections.value == 0
    assert kept.status == "in_progress"


async def test_a_second_watcher_of_a_followed_session_gets_the_same_list(broker: Broker) -> None:
    prefix = tenant()
    await created(broker, prefix + "a")
    first = await watching(broker, prefix + "*")
    second = await watching(broker, prefix + "a")
    assert first.frames == second.frames


async def test_a_write_heard_while_a_session_is_first_read_is_applied_after_the_read() -> None:
    class SlowReads(CountingStore):
        """Reads now, answers when let: a write in between is not in the read."""

        gate: asyncio.Event | None = None

        async def session_inboxes(self, session_ids: list[str], now: float) -> Any:
            found = await super().session_inboxes(session_ids, now)
            if self.gate is not None:
                await self.gate.wait()
            return found

    store = SlowReads()
    broker = Broker(Config(secret="s" * 32), store, clock=lambda: NOW)
    await broker.start()
    try:
        prefix = tenant()
        state = await created(broker, prefix + "a")
        store.gate = asyncio.Event()
        watcher = Watcher(prefix + "*")
        watching = asyncio.ensure_future(broker.inbox.watch(watcher))
        await eventually(lambda: prefix + "a" in broker.inbox.sessions, what="the first read to begin")
        followed = broker.inbox.sessions[prefix + "a"]
        await eventually(lambda: followed.hub.confirmed, what="the subscription")
        await written(broker, state, answer(state))  # its notice comes during the read
        await eventually(lambda: followed.heard, what="the notice, kept for after the read")
        store.gate.set()
        await watching
        # The read was of the question before; the list the socket gets is after the answer.
        assert [item["index"] for item in watcher.frames[0]["items"]] == [1]
        assert followed.entries[state.id].index == 1 and followed.heard == []
    finally:
        await broker.stop()


async def test_a_socket_that_connects_keeps_no_empty_session_followed(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inbox_module, "FOLLOW_LINGER", 0.0)
    sid = tenant() + "one"
    state = await created(broker, sid)
    first = await watching(broker, sid)
    await written(broker, state, machine.Cancel(state.id, 0))
    await eventually(lambda: first.of("inbox_removed"), what="the removal")

    second = await watching(broker, sid)  # the session is followed, with nothing open

    await broker.inbox.reconcile()
    assert broker.inbox.sessions == {}
    assert second.frames == [{"type": "inbox", "items": []}]
