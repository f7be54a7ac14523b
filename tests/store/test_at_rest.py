"""The store's content sealed at rest with the codec keys, on SQLite and PostgreSQL: what the tables
hold (no clear text, a key id), what every reader gets (clear text: the transcript, events, the
resumable stream, token deltas, reasoning, summaries, recorded tool results), rows written before
encryption, key rotation, and sealed rows read without the key, altered or moved to another session."""

from __future__ import annotations

import base64
import uuid
from datetime import datetime, timezone

import pytest
from sqlalchemy import text

from agentrt.schemas import (
    AutonomousTaskCreated,
    Budget,
    ConfigurationError,
    GraphRecordInput,
    Message,
    ModelRequestStarted,
    PositionedMessage,
    ReasoningBlock,
    StoreAppendInput,
    TaskCheckpoint,
    TaskGraphCreated,
    TaskRecordInput,
    TurnStarted,
    UserMessageAdded,
)
from agentrt.store import CLEAR_PREFIX, SEALED_PREFIX, SessionStream, Store, StoreCipher
from agentrt.worker import AesGcmStoreCipher, PayloadDecryptionError, generate_codec_key

K1, K2 = generate_codec_key(), generate_codec_key()
SECRET = "API_KEY=sk-live-" + uuid.uuid4().hex
TURN = "t1"
AT = datetime(2026, 12, 6, 9, 0, tzinfo=timezone.utc)
# How many of the readers' answers hold the secret (read_session): messages, messages_in, events,
# turn_events, the stream (an event and a delta), deltas, reasoning, summary, summaries, effects, effect.
READS = 12
CONTENT = {
    "messages": "content_json",
    "events": "body_json",
    "token_deltas": "text",
    "reasoning": "blocks_json",
    "context_summaries": "text",
    "effects": "result_text",
}


def write_session(store: Store, sid: str, secret: str = SECRET) -> None:
    """One of everything a session writes, each holding ``secret``."""
    store.append(StoreAppendInput(
        session_id=sid,
        messages=[PositionedMessage(position=0, turn_id=TURN, message=Message(role="user", text=f"cat .env: {secret}"))],
        events=[
            TurnStarted(turn_id=TURN, seq=1),
            UserMessageAdded(turn_id=TURN, principal="alice", text=f"cat .env: {secret}", position=0, seq=2),
            ModelRequestStarted(turn_id=TURN, round=1, profile="p", seq=3),
        ],
    ))
    store.append_deltas(sid, TURN, 1, 1, ["the file says ", secret], 0)
    store.put_reasoning(sid, 1, [ReasoningBlock(type="reasoning", provider="openai", text=f"thinking about {secret}")], turn_id=TURN, round=1)
    store.put_summary(sid, 1, 1, "p", f"summary: {secret}")
    key = f"session-{sid}/{TURN}/c1"
    store.claim_effect(key, sid, "shell.run")
    store.record_effect(key, "applied", secret)


def read_session(store: Store, sid: str) -> str:
    """Everything the store's readers give back for the session, as one text."""
    stream = SessionStream.resume(store, sid, None)
    parts = [
        *(m.text for _, m in store.messages(sid)),
        *(m.text for _, m in store.messages_in(sid, [(0, 5)])),
        *(e.model_dump_json() for e in store.events(sid)),
        *(e.model_dump_json() for e in store.turn_events(sid, TURN)),
        *(entry.event.model_dump_json() if entry.event else entry.delta.text for entry in stream.read()),  # type: ignore[union-attr]
        *(d.text for d in store.deltas(sid)),
        *(b.text or "" for blocks in store.reasoning_at(sid, [1]).values() for b in blocks),
        store.summary(sid, 1) or "",
        *(t for _, _, t in store.summaries(sid)),
        *(e.result_text or "" for e in store.effects(sid)),
        (store.effect(f"session-{sid}/{TURN}/c1").result_text or ""),  # type: ignore[union-attr]
    ]
    return "\n".join(parts)


def stored(store: Store, sid: str) -> dict[str, list[str]]:
    """The raw content columns of the session's rows, by table."""
    out: dict[str, list[str]] = {}
    with store.engine.connect() as conn:
        for table, column in CONTENT.items():
            where = "idempotency_key LIKE :key" if table == "effects" else "session_id = :sid"
            rows = conn.execute(text(f"SELECT {column} FROM {table} WHERE {where}"), {"sid": sid, "key": f"session-{sid}/%"})
            out[table] = [r[0] for r in rows]
    return out


def test_a_store_with_a_cipher_holds_no_content_in_clear_and_reads_it_in_clear(db_url: str) -> None:
    sid = uuid.uuid4().hex[:12]
    with Store.open(db_url, cipher=AesGcmStoreCipher({"k1": K1}, "k1")) as store:
        write_session(store, sid)
        raw = stored(store, sid)
        shown = read_session(store, sid)

    assert all(raw.values()), raw
    assert not [value for values in raw.values() for value in values if SECRET in value]
    assert all(value.startswith(f"{SEALED_PREFIX}k1:") for values in raw.values() for value in values)
    assert shown.count(SECRET) == READS


def test_rows_written_before_encryption_stay_readable_beside_sealed_ones(db_url: str) -> None:
    sid, earlier = uuid.uuid4().hex[:12], "OLD_TOKEN=" + uuid.uuid4().hex
    with Store.open(db_url) as clear:
        write_session(clear, sid, earlier)
        assert all(any(earlier in v for v in values) for values in stored(clear, sid).values())

    with Store.open(db_url, cipher=AesGcmStoreCipher({"k1": K1}, "k1")) as store:
        store.append(StoreAppendInput(session_id=sid, messages=[
            PositionedMessage(position=1, turn_id=TURN, message=Message(role="assistant", text=SECRET)),
        ]))
        store.append_deltas(sid, TURN, 1, 1, [SECRET], 2)
        messages = [m.text for _, m in store.messages(sid)]
        deltas = [d.text for d in store.deltas(sid)]
        everything = read_session(store, sid)

    assert messages == [f"cat .env: {earlier}", SECRET]
    assert deltas == ["the file says ", earlier, SECRET]
    assert earlier in everything


def test_a_rotated_key_reads_rows_of_the_old_one_and_seals_with_the_new(db_url: str) -> None:
    old_sid, new_sid = uuid.uuid4().hex[:12], uuid.uuid4().hex[:12]
    with Store.open(db_url, cipher=AesGcmStoreCipher({"k1": K1}, "k1")) as store:
        write_session(store, old_sid)
    with Store.open(db_url, cipher=AesGcmStoreCipher({"k1": K1, "k2": K2}, "k2")) as store:
        write_session(store, new_sid)
        assert read_session(store, old_sid).count(SECRET) == READS
        assert read_session(store, new_sid).count(SECRET) == READS
        assert all(v.startswith(f"{SEALED_PREFIX}k2:") for values in stored(store, new_sid).values() for v in values)


def test_a_store_without_the_keys_refuses_sealed_rows_naming_the_key(db_url: str) -> None:
    sid = uuid.uuid4().hex[:12]
    with Store.open(db_url, cipher=AesGcmStoreCipher({"k1": K1}, "k1")) as store:
        write_session(store, sid)

    with Store.open(db_url) as keyless, pytest.raises(ConfigurationError, match="codec key 'k1'") as caught:
        keyless.messages(sid)
    assert SECRET not in str(caught.value)
    with Store.open(db_url, cipher=AesGcmStoreCipher({"k2": K2}, "k2")) as other, pytest.raises(PayloadDecryptionError) as refused:
        other.events(sid)
    assert refused.value.key_id == "k1"


def flipped(value: str) -> str:
    """A sealed value with one bit of its ciphertext flipped."""
    head, _, encoded = value.rpartition(":")
    data = bytearray(base64.b64decode(encoded))
    data[20] ^= 1
    return f"{head}:{base64.b64encode(bytes(data)).decode()}"


def test_a_sealed_row_moved_to_another_session_or_altered_fails_instead_of_showing(db_url: str) -> None:
    victim, attacker = uuid.uuid4().hex[:12], uuid.uuid4().hex[:12]
    with Store.open(db_url, cipher=AesGcmStoreCipher({"k1": K1}, "k1")) as store:
        write_session(store, victim)
        store.append(StoreAppendInput(session_id=attacker, messages=[
            PositionedMessage(position=0, turn_id=TURN, message=Message(role="user", text="mine")),
        ]))
        with store.engine.begin() as conn:  # someone with the database copies the victim's row into their session
            conn.execute(text(
                "UPDATE messages SET content_json = (SELECT content_json FROM messages WHERE session_id = :v AND position = 0) "
                "WHERE session_id = :a AND position = 0"
            ), {"v": victim, "a": attacker})
            conn.execute(text("UPDATE token_deltas SET text = :t WHERE session_id = :v AND idx = 1"), {
                "v": victim, "t": flipped(stored(store, victim)["token_deltas"][1]),
            })

        with pytest.raises(PayloadDecryptionError, match="fails authentication"):
            store.messages(attacker)
        with pytest.raises(PayloadDecryptionError, match="fails authentication"):
            store.deltas(victim)


def test_the_worker_s_cipher_is_a_store_cipher() -> None:
    assert isinstance(AesGcmStoreCipher({"k1": K1}, "k1"), StoreCipher)


@pytest.mark.parametrize("hostile", [f"{SEALED_PREFIX}k1:AAAA", f"{SEALED_PREFIX}nope", f"{CLEAR_PREFIX}{SEALED_PREFIX}x", CLEAR_PREFIX])
def test_text_that_looks_sealed_reads_back_as_written_with_and_without_keys(db_url: str, hostile: str) -> None:
    # A model's or a tool's text may start like a sealed value: read in clear, it is never taken for one.
    sid = uuid.uuid4().hex[:12]
    with Store.open(db_url) as clear:
        clear.append_deltas(sid, TURN, 1, 1, [hostile], 0)
        clear.put_summary(sid, 1, 1, "p", hostile)
        key = f"session-{sid}/{TURN}/c1"
        clear.claim_effect(key, sid, "shell.run")
        clear.record_effect(key, "applied", hostile)
        assert [d.text for d in clear.deltas(sid)] == [hostile]
        assert clear.summary(sid, 1) == hostile and clear.effects(sid)[0].result_text == hostile

    with Store.open(db_url, cipher=AesGcmStoreCipher({"k1": K1}, "k1")) as store:
        store.append_deltas(sid, TURN, 1, 1, [hostile], 1)
        assert [d.text for d in store.deltas(sid)] == [hostile, hostile]
        assert store.summary(sid, 1) == hostile and store.effect(key).result_text == hostile  # type: ignore[union-attr]


def test_keys_the_codec_refuses_are_refused_by_the_store_cipher() -> None:
    with pytest.raises(ConfigurationError, match="32 bytes"):
        AesGcmStoreCipher({"k1": b"short"}, "k1")
    with pytest.raises(ConfigurationError, match="not among the keys"):
        AesGcmStoreCipher({"k1": K1}, "k2")


def test_what_tasks_and_graphs_were_asked_and_did_is_sealed_and_reads_in_clear(db_url: str) -> None:
    task_id, graph_id = f"t{uuid.uuid4().hex[:10]}", f"g{uuid.uuid4().hex[:10]}"
    goal = f"rotate the key {SECRET}"
    task_events = [AutonomousTaskCreated(
        seq=1, at=AT, task_id=task_id, owner="alice", goal=goal, max_sessions=3, budget=Budget(), schedule="back to back"
    )]
    checkpoint = TaskCheckpoint(number=1, session_id=f"{task_id}-s1", at=AT, session_status="completed", done=f"read {SECRET}")
    graph_events = [TaskGraphCreated(seq=1, at=AT, graph_id=graph_id, owner="alice", goal=goal, approve_plan="auto")]
    with Store.open(db_url, cipher=AesGcmStoreCipher({"k1": K1}, "k1")) as store:
        store.record_task(TaskRecordInput(
            task_id=task_id, owner="alice", goal=goal, status="running", workspace="/srv/ws", events=task_events, checkpoint=checkpoint,
        ))
        store.record_graph(GraphRecordInput(graph_id=graph_id, owner="alice", goal=goal, status="planning", workspace="/srv/ws", events=graph_events))
        with store.engine.connect() as conn:
            raw = [
                *conn.execute(text("SELECT goal FROM tasks WHERE task_id = :i"), {"i": task_id}).scalars(),
                *conn.execute(text("SELECT body_json FROM task_events WHERE task_id = :i"), {"i": task_id}).scalars(),
                *conn.execute(text("SELECT body_json FROM task_checkpoints WHERE task_id = :i"), {"i": task_id}).scalars(),
                *conn.execute(text("SELECT goal FROM graphs WHERE graph_id = :i"), {"i": graph_id}).scalars(),
                *conn.execute(text("SELECT body_json FROM graph_events WHERE graph_id = :i"), {"i": graph_id}).scalars(),
            ]
        assert len(raw) == 5 and all(value.startswith(f"{SEALED_PREFIX}k1:") for value in raw), raw
        assert store.task_events(task_id) == task_events and store.graph_events(graph_id) == graph_events
        assert store.task_checkpoints(task_id) == [checkpoint]
        assert store.get_task(task_id).goal == goal  # type: ignore[union-attr]
        assert [t.goal for t in store.list_tasks("alice") if t.task_id == task_id] == [goal]

    with Store.open(db_url) as keyless, pytest.raises(ConfigurationError, match="codec key 'k1'"):
        keyless.task_events(task_id)
