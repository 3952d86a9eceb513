"""broker/service/ in process, on a memory store that counts its reads: who wakes, who reads.

A waiting agent call wakes only for what can end its wait, and takes the outcome from the
notice that carries it; local clients follow a session from numbered notices, reading the
store only when a number is missing. Writes "from another process" are made on the store
directly, as another broker would; a lost notice is a write made while the store's notice
handler is switched off.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest

from broker.core import frames, machine
from broker.core.actors import Actor, ClientInfo
from broker.core.errors import BrokerError
from broker.core.machine import Questionnaire
from broker.core.model import Question, StartInput, parse_tool_input
from broker.runtime.config import Config
from broker.service import EVERY_WRITE, OUTCOMES_ONLY, Broker, Encoded, SessionHub, Wake, _watch
from broker.store.base import Head, Notice, Presence
from broker.store.memory import MemoryStore
from tests.helpers.samples import new_sid as new_session
from tests.helpers.waiting import eventually

DEADLINE = 5.0  # seconds any awaited event may take


def _questions() -> tuple[Question, ...]:
    parsed = parse_tool_input(
        {
            "action": "start",
            "questions": [
                {"id": "target", "prompt": "Where?", "type": "single", "options": [{"id": "staging"}, {"id": "prod"}]},
                {"id": "when", "prompt": "When?", "type": "single", "options": [{"id": "now"}, {"id": "later"}]},
            ],
        }
    )
    assert isinstance(parsed, StartInput)
    return parsed.questions


QUESTIONS = _questions()


class CountingStore(MemoryStore):
    """The memory store, counting the reads the service makes."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: dict[str, int] = {"load": 0, "head": 0, "presence": 0, "queue": 0}

    async def load(self, session_id: str, questionnaire_id: str) -> Questionnaire | None:
        self.reads["load"] += 1
        return await super().load(session_id, questionnaire_id)

    async def head(self, session_id: str) -> Head:
        self.reads["head"] += 1
        return await super().head(session_id)

    async def presence(self, session_id: str, now: float) -> Presence:
        self.reads["presence"] += 1
        return await super().presence(session_id, now)

    async def queue(self, session_id: str) -> list[str]:
        self.reads["queue"] += 1
        return await super().queue(session_id)

    def reset(self) -> None:
        self.reads = dict.fromkeys(self.reads, 0)

    def silently(self) -> Any:
        """A context in which writes publish nothing: their notices are lost."""
        store = self

        class _Silent:
            def __enter__(self) -> None:
                self.handler, store._on_notice = store._on_notice, None

            def __exit__(self, *exc: object) -> None:
                store._on_notice = self.handler

        return _Silent()


class Client:
    """A connected client as the service sees it: frames land in a queue."""

    def __init__(self, session_id: str) -> None:
        self.client_id = f"c-{uuid.uuid4().hex[:8]}"
        self.session_id = session_id
        self.codec: frames.Codec = "json"
        self.actor = Actor("tester", "client", ClientInfo("bot", "a test"))
        self.frames: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.closed_with: tuple[int, str] | None = None

    def deliver(self, *frames: Encoded) -> None:
        for frame in frames:
            self.frames.put_nowait(frame.frame)

    def close(self, code: int, reason: str = "") -> None:
        self.closed_with = (code, reason)

    async def next(self, *types: str) -> dict[str, Any]:
        """The next frame of one of ``types`` (others are skipped)."""
        while True:
            frame = await asyncio.wait_for(self.frames.get(), DEADLINE)
            if frame["type"] in types:
                return frame

    def quiet(self) -> bool:
        return self.frames.empty()


@asynccontextmanager
async def running(**config: Any) -> AsyncIterator[tuple[Broker, CountingStore]]:
    store = CountingStore()
    broker = Broker(Config(**{"client_wait": 60.0, **config}), store)
    await broker.start()
    try:
        yield broker, store
    finally:
        await broker.stop()


async def joined(broker: Broker, session_id: str) -> Client:
    client = Client(session_id)
    await broker.join(client)
    await client.next("welcome")
    return client


async def answer(broker: Broker, client: Client, question: dict[str, Any], option: str) -> None:
    command = machine.AnswerQuestion(
        question["questionnaireId"], question["step"], question["question"]["id"], (option,)
    )
    await broker.command(client, frames.CommandFrame(command))


def agent_call(broker: Broker, session_id: str) -> asyncio.Task[tuple[int, dict[str, Any]]]:
    """An agent's start call on ``session_id``, running (it waits for the outcome)."""
    return asyncio.create_task(broker.start_questionnaire(session_id, QUESTIONS, None, wait=DEADLINE * 2))


async def shown_to_a_client(
    broker: Broker, store: CountingStore, session_id: str
) -> tuple[Client, asyncio.Task[tuple[int, dict[str, Any]]], Questionnaire]:
    """A client joined, an agent call started a questionnaire, the client was shown it."""
    client = await joined(broker, session_id)
    call = agent_call(broker, session_id)
    question = await client.next("question")
    state = await store.load(session_id, question["questionnaireId"])
    assert state is not None
    return client, call, state


def started(session_id: str) -> Questionnaire:
    return machine.start(f"q-{uuid.uuid4().hex[:8]}", session_id, QUESTIONS, time.time())


async def settle() -> None:
    """Let notices queued by the memory store (delivered on later loop turns) run."""
    for _ in range(5):
        await asyncio.sleep(0)


# --- waiting agent calls ----------------------------------------------------------------


async def test_answers_that_decide_nothing_do_not_wake_the_waiting_agent() -> None:
    async with running() as (broker, store):
        sid = new_session()
        client = await joined(broker, sid)
        await client.next("idle")
        call = agent_call(broker, sid)
        first = await client.next("question")
        store.reset()

        await answer(broker, client, first, "staging")
        second = await client.next("question")
        await settle()

        assert second["step"] == first["step"] + 1
        assert not call.done()
        assert store.reads == {"load": 0, "head": 0, "presence": 0, "queue": 0}

        await answer(broker, client, second, "now")
        status, body = await asyncio.wait_for(call, DEADLINE)

        assert status == 200
        assert body["details"]["status"] == "completed"
        assert store.reads["load"] == 0  # the outcome came with the write that decided it


async def test_the_agent_calls_waiting_are_counted_until_each_returns() -> None:
    async with running() as (broker, _):
        sid = new_session()
        client = await joined(broker, sid)
        call = agent_call(broker, sid)
        first = await client.next("question")
        reattached = asyncio.create_task(broker.wait_for_outcome(sid, first["questionnaireId"], wait=DEADLINE * 2))
        await eventually(lambda: broker.waiting_agent_calls == 2, "both calls counted")
        timed_out = await broker.wait_for_outcome(sid, first["questionnaireId"], wait=0.01)
        assert timed_out[0] == 202 and broker.waiting_agent_calls == 2

        await answer(broker, client, first, "staging")
        await answer(broker, client, await client.next("question"), "now")
        results = await asyncio.wait_for(asyncio.gather(call, reattached), DEADLINE)

        assert [status for status, _ in results] == [200, 200]
        assert broker.waiting_agent_calls == 0
        assert b"qbroker_agent_calls_waiting 0.0" in broker.render_metrics()


async def test_presence_is_not_read_before_anything_can_be_due() -> None:
    async with running(client_wait=60.0) as (broker, store):
        sid = new_session()

        status, body = await broker.start_questionnaire(sid, QUESTIONS, None, wait=0.05)

        assert status == 202 and body["status"] == "pending"
        assert store.reads["presence"] == 0


async def test_nobody_there_still_ends_in_ui_unavailable() -> None:
    async with running(client_wait=0.05) as (broker, store):
        status, body = await broker.start_questionnaire(new_session(), QUESTIONS, None, wait=DEADLINE)

        assert status == 200
        assert (body["details"]["status"], body["details"]["cancellationReason"]) == (
            "unavailable",
            "ui_unavailable",
        )
        assert store.reads["presence"] >= 1


async def test_the_last_local_client_leaving_wakes_waiting_agents_to_count_the_grace() -> None:
    # The waiter saw a client and would sleep a whole (long) reconcile interval; the leave
    # makes it look again, so the short grace ends the wait long before that.
    async with running(client_wait=0.05, reconnect_grace=0.2, reconcile_interval=60.0) as (broker, store):
        sid = new_session()
        client = await joined(broker, sid)
        call = agent_call(broker, sid)
        await client.next("question")
        # Past the client wait, the waiter counts the client: its one presence read.
        await eventually(lambda: store.reads["presence"] >= 1, "the waiter to count the client")

        await broker.leave(client)
        status, body = await asyncio.wait_for(call, DEADLINE)

        assert status == 200
        assert (body["details"]["status"], body["details"]["cancellationReason"]) == ("unavailable", "ui_error")


async def test_a_notice_from_an_older_broker_makes_agents_and_clients_look_again() -> None:
    async with running() as (broker, store):
        sid = new_session()
        client, call, state = await shown_to_a_client(broker, store, sid)
        with store.silently():  # "another broker" cancels it and publishes an old-style notice
            cancelled = machine.apply(state, machine.Abort(), state.updated_at)
            assert await store.compare_and_set(cancelled, state.version)

        work = broker.fanout.on_notice(Notice(sid, state.id, cancelled.version))
        if work is not None:
            await work

        status, body = await asyncio.wait_for(call, DEADLINE)
        assert status == 200 and body["details"]["status"] == "cancelled"
        assert (await client.next("closed"))["questionnaireId"] == state.id
        await client.next("idle")


async def test_a_waiting_agent_whose_outcome_notice_is_lost_hears_of_it_at_the_reconciliation() -> None:
    async with running(reconcile_interval=60.0) as (broker, store):
        sid = new_session()
        client, call, state = await shown_to_a_client(broker, store, sid)
        with store.silently():
            assert await store.compare_and_set(machine.apply(state, machine.Abort(), state.updated_at), state.version)
        await settle()
        assert not call.done()

        await broker.fanout.reconcile()

        status, body = await asyncio.wait_for(call, DEADLINE)
        assert status == 200 and body["details"]["status"] == "cancelled"


async def test_reconciliation_leaves_waiting_agents_alone_when_every_write_was_heard() -> None:
    async with running(reconcile_interval=60.0) as (broker, store):
        sid = new_session()
        client = await joined(broker, sid)
        call = agent_call(broker, sid)
        await answer(broker, client, await client.next("question"), "staging")
        await client.next("question")
        await settle()
        store.reset()

        await broker.fanout.reconcile()
        await broker.fanout.reconcile()
        await settle()

        assert not call.done()
        assert store.reads == {"load": 0, "head": 0, "presence": 0, "queue": 0}
        call.cancel()


def hearing(store: CountingStore) -> list[str | None]:
    """The statuses of the notices the broker is handed from now on, in order."""
    heard: list[str | None] = []
    handler = store._on_notice
    assert handler is not None

    async def listening(notice: Notice) -> None:
        heard.append(notice.status)
        work = handler(notice)
        if work is not None:
            await work

    store._on_notice = listening
    return heard


async def agent_waiting(broker: Broker, session_id: str) -> asyncio.Task[tuple[int, dict[str, Any]]]:
    """An agent's start call on ``session_id``, waiting (its subscription confirmed)."""
    call = agent_call(broker, session_id)
    hubs = broker.hubs
    await eventually(lambda: session_id in hubs and bool(hubs[session_id].confirmed), "the call subscribed")
    return call


async def answered_elsewhere(store: CountingStore, state: Questionnaire, *options: str) -> Questionnaire:
    """Answer ``state``'s questions with ``options`` as a client on another process would."""
    for option in options:
        question = state.current_question
        assert question is not None
        command = machine.AnswerQuestion(state.id, state.step, question.id, (option,))
        new = machine.apply(state, command, state.updated_at)
        assert await store.compare_and_set(new, state.version)
        state = new
    return state


async def test_where_only_agent_calls_wait_the_process_hears_only_outcomes() -> None:
    async with running() as (broker, store):
        sid = new_session()
        heard = hearing(store)
        call = await agent_waiting(broker, sid)
        head = await store.head(sid)
        assert head.state is not None

        await answered_elsewhere(store, head.state, "staging", "now")
        status, body = await asyncio.wait_for(call, DEADLINE)

        assert status == 200 and body["details"]["status"] == "completed"
        assert broker.hubs[sid].subscribed == {OUTCOMES_ONLY}
        assert heard == ["completed"]  # not the start, not the first answer


async def joined_where_an_agent_waits(
    broker: Broker, store: CountingStore, session_id: str
) -> tuple[asyncio.Task[tuple[int, dict[str, Any]]], Client, dict[str, Any], list[str | None]]:
    """An agent call waits, then a client joins and is shown the first question; from then
    on the notices the broker is handed are listed (the last item returned)."""
    call = await agent_waiting(broker, session_id)
    client = await joined(broker, session_id)
    first = await client.next("question")
    return call, client, first, hearing(store)


async def test_a_client_joining_where_an_agent_waits_makes_the_process_hear_every_write() -> None:
    async with running() as (broker, store):
        sid = new_session()
        call, client, first, heard = await joined_where_an_agent_waits(broker, store, sid)
        head = await store.head(sid)
        assert head.state is not None

        state = await answered_elsewhere(store, head.state, "staging")  # another process's client
        second = await client.next("question")
        await answered_elsewhere(store, state, "now")
        status, body = await asyncio.wait_for(call, DEADLINE)

        assert second["step"] == first["step"] + 1
        assert status == 200 and body["details"]["status"] == "completed"
        assert broker.hubs[sid].subscribed == {OUTCOMES_ONLY, EVERY_WRITE}
        await settle()
        assert heard[0] == "in_progress" and set(heard[1:]) == {"completed"}  # (an outcome may come twice)


async def test_a_local_clients_write_is_shown_and_wakes_the_agent_without_a_notice_on_the_memory_store() -> None:
    """On the memory store the writer's own process is the only one: a client's command is
    shown and its outcome handed to the waiting agent call by the writer, and the store
    publishes no notice of it (other stores publish it, for other processes)."""
    async with running() as (broker, store):
        sid = new_session()
        call, client, first, heard = await joined_where_an_agent_waits(broker, store, sid)
        await answer(broker, client, first, "staging")
        second = await client.next("question")
        await answer(broker, client, second, "now")
        status, body = await asyncio.wait_for(call, DEADLINE)

        assert status == 200 and body["details"]["status"] == "completed"
        assert (await client.next("closed"))["questionnaireId"] == first["questionnaireId"]
        await settle()
        assert heard == []
        assert broker.hubs[sid].heard == (await store.head(sid)).seq  # as the notices would have left it


# --- rounds of waiting -----------------------------------------------------------------


async def _watched(
    poke: Callable[[SessionHub], None], questionnaire_id: str = "q-1", version: int = 0
) -> Questionnaire | None:
    hub = SessionHub("s")
    hub.waiters = 1
    wake: Wake = hub.wake
    poke(hub)
    loop = asyncio.get_running_loop()
    return await _watch(loop, wake, questionnaire_id, version, loop.time() + 0.05)


def _state(questionnaire_id: str, version: int) -> Questionnaire:
    """An outcome (cancelled) of ``questionnaire_id`` at ``version``."""
    state = machine.apply(machine.start(questionnaire_id, "s", QUESTIONS, 0.0), machine.Abort(), 0.0)
    return msgspec.structs.replace(state, version=version)


async def test_a_waiter_follows_pokes_made_before_it_looked() -> None:
    mine = _state("q-1", 3)

    def two_pokes(hub: SessionHub) -> None:
        hub.poke(_state("q-other", 9))
        hub.poke(mine)

    assert await _watched(two_pokes, "q-1", version=2) is mine


async def test_an_outcome_no_newer_than_the_waiters_state_is_not_taken() -> None:
    # A late notice of a clarification already resumed must not end the resumed wait.
    assert await _watched(lambda hub: hub.poke(_state("q-1", 2)), "q-1", version=2) is None


async def test_a_poke_without_an_outcome_means_read_again() -> None:
    outcome = _state("q-1", 5)

    def pokes(hub: SessionHub) -> None:
        hub.poke()
        hub.poke(outcome)

    assert await _watched(pokes, "q-1", version=0) is None


async def test_a_round_wakes_every_waiter_when_set_and_at_once_after() -> None:
    loop = asyncio.get_running_loop()
    wake = Wake()
    waiting = [asyncio.create_task(wake.wait(loop, loop.time() + DEADLINE)) for _ in range(3)]
    await settle()
    assert not any(task.done() for task in waiting)

    wake.set()

    assert await asyncio.wait_for(asyncio.gather(*waiting), DEADLINE) == [True] * 3
    assert await wake.wait(loop, loop.time() - 1)  # already set: true even past its time
    assert wake._waiters == []


async def test_a_round_that_times_out_or_is_cancelled_keeps_no_waiter() -> None:
    loop = asyncio.get_running_loop()
    wake = Wake()
    staying = asyncio.create_task(wake.wait(loop, loop.time() + DEADLINE))
    cancelled = asyncio.create_task(wake.wait(loop, loop.time() + DEADLINE))
    await settle()

    assert await wake.wait(loop, loop.time() + 0.01) is False
    cancelled.cancel()
    await asyncio.gather(cancelled, return_exceptions=True)
    assert len(wake._waiters) == 1  # only the one still waiting

    wake.set()
    assert await asyncio.wait_for(staying, DEADLINE) is True


# --- clients following a session --------------------------------------------------------


async def test_a_questionnaire_started_elsewhere_is_shown_from_its_notice() -> None:
    async with running() as (broker, store):
        sid = new_session()
        client = await joined(broker, sid)
        await client.next("idle")
        store.reset()

        state = await store.create(started(sid))  # as another broker would

        question = await client.next("question")
        assert question["questionnaireId"] == state.id
        assert store.reads["head"] == 0 and store.reads["load"] == 0


async def test_closing_the_shown_questionnaire_shows_the_next_without_a_read() -> None:
    async with running() as (broker, store):
        sid = new_session()
        client = await joined(broker, sid)
        first, second = await store.create(started(sid)), await store.create(started(sid))
        question = await client.next("question")
        assert question["questionnaireId"] == first.id
        await answer(broker, client, question, "staging")
        question = await client.next("question")
        await settle()
        store.reset()

        await answer(broker, client, question, "later")

        assert (await client.next("closed"))["questionnaireId"] == first.id
        assert (await client.next("question"))["questionnaireId"] == second.id
        await settle()
        assert store.reads == {"load": 0, "head": 0, "presence": 0, "queue": 0}


async def test_after_a_lost_notice_the_next_one_reads_the_store_and_shows_the_oldest() -> None:
    async with running() as (broker, store):
        sid = new_session()
        client = await joined(broker, sid)
        await client.next("idle")
        with store.silently():
            oldest = await store.create(started(sid))  # its notice is lost

        await store.create(started(sid))  # numbered one past a write this process never heard of

        question = await client.next("question")
        assert question["questionnaireId"] == oldest.id
        assert store.reads["head"] >= 1


class Failing(Client):
    """A client whose deliver raises, as a connection on its way out once did."""

    def deliver(self, *frames: Encoded) -> None:
        raise RuntimeError("connection is closing")


async def test_a_client_that_fails_to_take_a_frame_does_not_keep_it_from_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with running() as (broker, store):
        sid = new_session()
        first = await joined(broker, sid)
        failing = Failing(sid)
        broker.hubs[sid].clients[failing.client_id] = failing  # between the two in the fan-out
        last = await joined(broker, sid)

        state = await store.create(started(sid))  # as another broker would: a notice

        for client in (first, last):
            assert (await client.next("question"))["questionnaireId"] == state.id
        assert broker.hubs[sid].shown_id == state.id  # the notice was applied in full
        assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [
            "delivery to a client failed; closing it"
        ]
        # Counted as shown, the frame would never reach it: closed, it reconnects and reads.
        assert failing.closed_with == (1011, "internal error")
        assert first.closed_with is None and last.closed_with is None


async def test_a_session_that_fails_to_reconcile_does_not_keep_the_others_behind() -> None:
    async with running(reconcile_interval=60.0) as (broker, store):
        broken, behind = new_session(), new_session()
        failing = await joined(broker, broken)
        client = await joined(broker, behind)
        await client.next("idle")
        with store.silently():  # both notices are lost: only the reconciliation shows them
            await store.create(started(broken))
            state = await store.create(started(behind))
        broker.hubs[broken].clients[failing.client_id] = Failing(broken)
        # The broken session comes first in the reconciliation's round.
        assert list(broker.hubs)[:2] == [broken, behind]

        await broker.fanout.reconcile()

        assert (await client.next("question"))["questionnaireId"] == state.id


async def test_reconciliation_reads_only_the_sessions_behind_the_store() -> None:
    async with running(reconcile_interval=60.0) as (broker, store):
        behind, current = new_session(), new_session()
        behind_client, current_client = await joined(broker, behind), await joined(broker, current)
        await store.create(started(current))
        await current_client.next("question")
        with store.silently():
            lost = await store.create(started(behind))
        await settle()
        store.reset()

        await broker.fanout.reconcile()

        assert (await behind_client.next("question"))["questionnaireId"] == lost.id
        assert store.reads["head"] == 1
        assert current_client.quiet()


async def test_a_write_of_this_process_shows_even_with_earlier_notices_still_queued() -> None:
    async with running() as (broker, store):
        sid = new_session()
        client = await joined(broker, sid)
        state = await store.create(started(sid))
        question = await client.next("question")
        drafted = machine.apply(state, machine.Draft(state.id, state.step, ("prod",)), state.updated_at)
        assert await store.compare_and_set(drafted, state.version)  # "elsewhere"; notice not yet handled

        await answer(broker, client, question, "staging")  # the cached view is stale: re-run on the store's

        following = await client.next("question")
        assert following["step"] == question["step"] + 1
        await settle()
        hub = broker.hubs[sid]
        assert hub.shown is not None and hub.shown.step == following["step"]
        assert hub.seq == (await store.head(sid)).seq


@pytest.mark.parametrize("outcome", ["clarify", "cancel"])
async def test_every_outcome_written_by_a_client_ends_the_agents_wait(outcome: str) -> None:
    async with running() as (broker, store):
        sid = new_session()
        client = await joined(broker, sid)
        call = agent_call(broker, sid)
        question = await client.next("question")
        qid, step = question["questionnaireId"], question["step"]
        command: machine.ClientCommand = (
            machine.Clarify(qid, step, "Which staging?") if outcome == "clarify" else machine.Cancel(qid, step)
        )
        store.reset()

        await broker.command(client, frames.CommandFrame(command))

        status, body = await asyncio.wait_for(call, DEADLINE)
        assert status == 200
        assert body["details"]["status"] == ("needs_clarification" if outcome == "clarify" else "cancelled")
        assert store.reads["load"] == 0


async def test_a_command_that_loses_every_compare_and_set_is_a_conflict_and_changes_nothing() -> None:
    """Every commit lost to another writer (16 in a row): 409 ``conflict``, its message in the
    agent API's form, and the stored state as it was."""
    async with running() as (broker, store):
        state = await store.create(started(new_session()))

        async def always_lost(
            state: Questionnaire, expected_version: int, *, shown_by_writer: bool = False, events: Any = ()
        ) -> None:
            return None

        store.commit = always_lost  # type: ignore[method-assign]  # (another writer always wins)
        with pytest.raises(BrokerError) as refused:
            await broker.writer.update(state.session_id, state.id, machine.Abort())
        assert refused.value.code == "conflict"
        assert refused.value.message == f"questionnaire: {state.id} is changing too fast; try again"
        assert await store.load(state.session_id, state.id) == state
