"""Property-based fuzzing of everything that parses input from outside: events, sessions, judge answers.

The agents catch only the exceptions they expect (``InvalidEvent``, ``JudgeError``, ``ValueError``);
anything else escaping these functions crashes the partition writer and stops the monitor. So the
properties are: no other exception escapes, and every rejected input is accounted for with a
bounded reason (the dead-letter reason / metric label).
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
from typing import Any

import httpx
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from prometheus_client import CollectorRegistry

from monitor.contracts.errors import InvalidEvent, JudgeError, JudgeResponseError
from monitor.contracts.events import Conversation, EndEvent, TurnEvent, decode_event, encode
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.scores import ScoreRecord
from monitor.contracts.settings import Settings
from monitor.judge.interpret import parse_likert, parse_spur
from monitor.stages import sessionize as ses
from tests.support.judge_wiring import judge_from
from tests.support.memstore import MemStore

DECODE_REASONS = {"empty", "malformed_json", "invalid_schema", "too_large"}
RUBRIC = load_rubric_set("spur-copilot", Settings().prompts_dir)
ITEMS = list(RUBRIC.items)

# --- the event decoder -----------------------------------------------------------------------------

_timestamps = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12),
    st.integers(-(2**40), 2**40),
    st.sampled_from(["2024-05-01T10:00:00Z", "2024-05-01", "NaN", "nan", "inf", "-Infinity", "1e999", "", "now",
                     "2024-13-45T99:00:00"]),
    st.none(), st.booleans(),
)
_texts = st.one_of(st.text(max_size=40), st.sampled_from(["", " ", "\x00", "\u202e", "😂" * 5, "a" * 3000]))
_ids = st.one_of(st.text(min_size=0, max_size=12), st.sampled_from(["c1", "c2", "x" * 300]), st.integers(0, 5))

_LEDGER_DIR = tempfile.mkdtemp(prefix="convmon-fuzz-")  # the judge budget's ledger (label store DB)


def _event_dicts() -> st.SearchStrategy[dict[str, Any]]:
    turn = st.fixed_dictionaries(
        {"conversation_id": _ids, "turn_index": st.one_of(st.integers(-2, 2**64), st.floats(), st.text(max_size=3)),
         "role": st.sampled_from(["user", "assistant", "system", "robot", "", None]), "text": _texts,
         "timestamp": _timestamps},
        optional={"type": st.sampled_from(["turn", "end", "conversation", "poll", 1]),
                  "feedback": st.one_of(st.none(), st.fixed_dictionaries(
                      {}, optional={"thumbs": st.sampled_from(["up", "down", "sideways"]),
                                    "csat": st.integers(-1, 7)})),
                  "metadata": st.dictionaries(st.text(max_size=5), st.one_of(st.text(max_size=5), st.integers()),
                                              max_size=3),
                  "simulated_truth": st.lists(st.text(max_size=10), max_size=3), "extra": st.integers()},
    )
    conversation = st.fixed_dictionaries(
        {"type": st.just("conversation"), "conversation_id": _ids,
         "turns": st.lists(st.fixed_dictionaries({"index": st.integers(-1, 5), "role": st.sampled_from(["user", "x"]),
                                                  "text": _texts}, optional={"timestamp": _timestamps}), max_size=4)},
        optional={"started_at": _timestamps, "ended_at": _timestamps,
                  "end_reason": st.sampled_from(["end", "idle", "producer", "crash"])},
    )
    return st.one_of(turn, conversation)


def _check_decoded(raw: bytes) -> None:
    """What the sessionize agent relies on for an accepted event, or a bounded reason for a rejected one."""
    try:
        event = decode_event(raw, max_bytes=4096)
    except InvalidEvent as exc:
        assert exc.reason in DECODE_REASONS
        assert exc.detail and len(exc.detail) < 3000
        return
    event.conversation_id.encode()  # the agent re-keys by it: must be encodable
    encoded = encode(event)  # an accepted event survives the trip to the next topic unchanged
    assert type(event).model_validate_json(encoded) == event


@settings(max_examples=400, deadline=None)
@given(_event_dicts())
def test_decoder_on_mutated_events_accepts_or_rejects_with_a_reason(obj: dict[str, Any]) -> None:
    _check_decoded(json.dumps(obj).encode())


@settings(max_examples=200, deadline=None)
@given(_event_dicts(), st.data())
def test_decoder_on_corrupted_bytes(obj: dict[str, Any], data: st.DataObject) -> None:
    """Bit flips, truncation and byte insertions on a well-formed record (what a broken producer sends)."""
    raw = bytearray(json.dumps(obj).encode())
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        pos = data.draw(st.integers(0, max(len(raw) - 1, 0)))
        if op == "flip" and raw:
            raw[pos] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "cut":
            del raw[pos:]
        else:
            raw[pos:pos] = data.draw(st.binary(min_size=1, max_size=4))
    _check_decoded(bytes(raw))


def test_decoder_rejects_non_finite_timestamps() -> None:
    """JSON has no NaN, but pydantic's lax floats accept the *strings* "NaN" / "inf".

    A NaN timestamp stored in the sessions table becomes ``null`` in the changelog (the changelog encodes
    with orjson), and after a restart ``min(None, ts)`` in ``apply_turn`` crashes the sessionizer
    (see the stateful test below). Such an event must be dead-lettered as ``invalid_schema``.
    """
    for value in ("NaN", "nan", "inf", "-Infinity"):
        raw = orjson.dumps({"conversation_id": "c", "turn_index": 0, "role": "user", "text": "hi", "timestamp": value})
        try:
            event = decode_event(raw)
        except InvalidEvent as exc:
            assert exc.reason == "invalid_schema" and "timestamp" in exc.detail
        else:
            raise AssertionError(f"timestamp {value!r} was accepted as {event.timestamp!r}")  # type: ignore[union-attr]


# --- the sessionizer, as a state machine over the agent's table -----------------------------------

LIMITS = ses.Limits(max_turns=6, max_chars=400, max_bytes=1200, max_metadata_bytes=256)
IDLE_S, RETENTION_S, LATENESS_S = 10.0, 30.0, 3.0
PARTITIONS = {0, 1, 2, 3}


class SessionizerMachine(RuleBasedStateMachine):
    """Drives the hot path's sessionizer as monitor/stages/hotpath.py does, sweep and restarts included.

    ``restart`` round-trips the store through the changelog's JSON codec (orjson) and rebuilds the in-memory index,
    as a crash and a changelog recovery do. Invariants: no exception escapes; every input is
    accounted for (accepted, pending, emitted, or dead-lettered with a reason); each conversation is
    emitted at most once per tombstone lifetime; emitted conversations hold exactly the accepted
    turns (or are marked truncated and hold a subset); state stays within the limits and JSON-serialisable.
    """

    def __init__(self) -> None:
        super().__init__()
        self.store = MemStore()
        self.s = self._sessionizer(self.store)
        self.now = 1_000.0
        self.inputs = 0
        self.outcomes: dict[str, int] = {}
        self.accepted: dict[str, dict[int, str]] = {}  # open conversation -> turn index -> latest text
        self.emitted: dict[str, int] = {}  # conversation -> emissions since its tombstone was last forgotten
        self.held: dict[str, set[int]] = {}  # the turn indices of each conversation's last emission
        self.truncated: dict[str, bool] = {}
        self.ended_by_end: dict[str, bool] = {}

    @staticmethod
    def _sessionizer(store: MemStore) -> ses.Sessionizer:
        return ses.Sessionizer(store, LIMITS, idle_timeout_s=IDLE_S, closed_retention_s=RETENTION_S,
                               allowed_lateness_s=LATENESS_S)

    def _count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def _emit(self, conversation: Conversation) -> None:
        cid = conversation.conversation_id
        self.emitted[cid] = self.emitted.get(cid, 0) + 1
        self.held[cid] = {t.index for t in conversation.turns}
        self.truncated[cid] = bool(conversation.truncated)
        self.ended_by_end[cid] = conversation.end_reason == "end"
        assert self.emitted[cid] == 1, f"{cid} emitted twice"
        assert Conversation.model_validate_json(encode(conversation)) == conversation
        accepted = self.accepted.pop(cid, {})
        got = {t.index: t.text for t in conversation.turns}
        if conversation.truncated:
            assert got.items() <= accepted.items() and len(got) <= LIMITS.max_turns
        else:
            assert got == accepted

    @rule(cid=st.sampled_from(["a", "b", "c"]), index=st.integers(0, 9), text=_texts,
          ts=st.one_of(st.floats(0, 2e9), st.sampled_from(["2024-05-01T10:00:00Z", "NaN", "inf"])),
          partition=st.integers(0, 3), meta=st.dictionaries(st.sampled_from(["app", "x", "y"]), st.text(max_size=90),
                                                            max_size=2))
    def turn(self, cid: str, index: int, text: str, ts: Any, partition: int, meta: dict[str, str]) -> None:
        self.inputs += 1
        raw = orjson.dumps({"conversation_id": cid, "turn_index": index, "role": "user", "text": text,
                            "timestamp": ts, "metadata": meta})
        try:
            event = decode_event(raw)
        except InvalidEvent as exc:
            self._count(f"dead:{exc.reason}")
            return
        assert isinstance(event, TurnEvent)
        if cid in self.s.open:
            partition = self.s.open[cid].partition  # one partition owns a conversation (the agent re-keys)
        expected = text if len(text) <= LIMITS.max_turn_chars else text[:LIMITS.max_turn_chars] + ses.TRUNCATION_MARK
        before = dict(self.accepted.get(cid, {}))
        if cid not in self.s.closed:
            self.accepted.setdefault(cid, {})[index] = expected
        outcome, closed = self.s.turn(event, partition, self.now)
        if outcome == "late":
            self._count("dead:late_event")
            return
        if outcome == "redelivered":  # only a turn its closed conversation held (or dropped by the caps)
            assert cid in self.s.closed and index < self.s.closed[cid].turns
            assert index in self.held[cid] or self.truncated[cid]
            self._count("redelivered")
            return
        o = self.s.open.get(cid)
        if o is not None and index not in o.sizes:  # dropped by the caps: the earlier text (if any) stays
            assert o.truncated
            if index in before:
                self.accepted[cid][index] = before[index]
            else:
                self.accepted[cid].pop(index)
        for conversation in closed:
            self._emit(conversation)
        self._count("accepted")

    @rule(cid=st.sampled_from(["a", "b", "c", "never"]), rekeyed=st.booleans(),
          count=st.one_of(st.none(), st.integers(1, 4)))
    def end(self, cid: str, rekeyed: bool, count: int | None) -> None:
        self.inputs += 1
        event = decode_event(orjson.dumps({"type": "end", "conversation_id": cid, "timestamp": self.now,
                                           **({"turn_count": count} if count else {})}))
        assert isinstance(event, EndEvent)
        partition = self.s.open[cid].partition if cid in self.s.open else 0
        outcome, closed = self.s.end(event, partition, self.now, rekeyed=rekeyed)
        if outcome in ("late", "unknown_conversation"):
            self._count("dead:late_event" if outcome == "late" else "dead:unknown_conversation")
            return
        if outcome == "redelivered":  # only the end its conversation closed on
            assert self.s.closed[cid].ended and self.ended_by_end[cid]
            self._count("redelivered")
            return
        for conversation in closed:
            self._emit(conversation)
        self._count("ended" if closed else "pending")

    @rule(raw=st.binary(max_size=60))
    def garbage(self, raw: bytes) -> None:
        self.inputs += 1
        try:
            decode_event(raw)
        except InvalidEvent as exc:
            self._count(f"dead:{exc.reason}")
        else:
            self._count("ignored_valid_garbage")  # a valid event by chance; not applied (other conversation ids)

    @rule(dt=st.sampled_from([0.5, 4.0, 11.0, 31.0]))
    def tick(self, dt: float) -> None:
        """The sweep timer, as in agents.py."""
        self.now += dt
        forgotten = {cid for cid, (t, *_) in self.s.closed.items() if self.now - t > RETENTION_S}
        closed = self.s.sweep(self.now, PARTITIONS)
        for conversation in closed.conversations:
            self._emit(conversation)
        for cid, _ in closed.unknown:
            assert not self.accepted.pop(cid, {})  # no turn was accepted for it
        for cid in forgotten:
            assert cid not in self.s.closed
            self.emitted.pop(cid, None)

    @rule()
    def restart(self) -> None:
        """A crash: the store comes back from its changelog (the changelog's JSON codec) and the index is rebuilt."""
        self.store = self.store.restarted()
        self.s = self._sessionizer(self.store)
        self.s.rebuild(PARTITIONS, self.now)

    @invariant()
    def every_input_is_accounted_for(self) -> None:
        assert sum(self.outcomes.values()) == self.inputs
        reasons = {k.split(":", 1)[1] for k in self.outcomes if k.startswith("dead:")}
        assert reasons <= DECODE_REASONS | {"late_event", "unknown_conversation"}

    @invariant()
    def state_is_bounded_and_serialisable(self) -> None:
        for key, value in self.store.items():
            assert orjson.loads(orjson.dumps(value)) is not None, key
        for cid, o in self.s.open.items():
            assert len(o.sizes) <= LIMITS.max_turns
            assert o.chars == sum(c for c, _ in o.sizes.values()) <= LIMITS.max_chars  # the running sums hold
            assert o.nbytes == sum(b for _, b in o.sizes.values()) <= LIMITS.max_bytes
            assert len(orjson.dumps(o.meta)) <= LIMITS.max_metadata_bytes
            assert o.sizes.keys() <= self.accepted.get(cid, {}).keys()


SessionizerMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=40, deadline=None,
                                                suppress_health_check=[HealthCheck.too_slow])
TestSessionizerMachine = SessionizerMachine.TestCase


# --- the judge's answer parser and the judge behind it -------------------------------------------

_answers = st.one_of(
    st.sampled_from(["Y", "N", "y", "no", "S", "V", "NA", "n/a", "agree", "strongly disagree", "maybe", "", "1e1",
                     "nan", "inf", "-3", "0", "10", "11", "4.5"]),
    st.text(max_size=12), st.integers(-5, 15), st.floats(), st.booleans(), st.none(),
)
_scores = st.one_of(st.integers(-5, 15), st.floats(), st.text(max_size=5), st.none(), st.sampled_from(["8/10", "7"]))
_item_keys = st.sampled_from([i.id for i in ITEMS] + [i.name for i in ITEMS] + ["sat.unknown_item", "Gratitude!!"])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_item_keys, st.one_of(
    st.fixed_dictionaries({}, optional={"answer": _answers, "score": _scores, "reason": st.text(max_size=10)}),
    st.lists(st.one_of(_answers, _scores), max_size=3), _answers), max_size=len(ITEMS) + 3),
    st.sampled_from(["plain", "fenced", "prose"]))
def test_parser_on_answer_shaped_json(answers: dict[str, Any], wrapping: str) -> None:
    """Per-item answers of every type, wrapped as a model would; results are complete and in range."""
    body = json.dumps(answers)
    wrapped = {"plain": body, "fenced": f"```json\n{body}\n```", "prose": f"Here you go:\n{body}\nHope it helps."}
    text = wrapped[wrapping]
    for parse in (parse_spur, parse_likert):
        try:
            results = parse(text, ITEMS)
        except JudgeResponseError as exc:
            problems = exc.problems  # type: ignore[attr-defined]
            assert problems and all(isinstance(p, str) for p in problems)
            assert len(str(exc)) < 2000
            continue
        assert [r.item_id for r in results] == RUBRIC.item_ids
        for r in results:
            assert r.score is None or (math.isfinite(r.score) and 0 <= r.score <= 10)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["[", "{", '{"a":', "[1,", '{"sat.gratitude": ']), st.integers(1_000, 60_000))
def test_parser_on_pathologically_nested_or_huge_answers(unit: str, repeat: int) -> None:
    try:
        parse_spur(unit * repeat, ITEMS)
    except JudgeResponseError:
        pass


_CONVERSATION = Conversation(conversation_id="fz", turns=[
    {"index": 0, "role": "user", "text": "thanks, that worked"}, {"index": 1, "role": "assistant", "text": "ok"}])
_bodies = st.one_of(
    st.binary(max_size=40),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                 lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                 max_leaves=10).map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries({"choices": st.one_of(
        st.just([]), st.lists(st.one_of(st.none(), st.fixed_dictionaries({"message": st.one_of(
            st.none(), st.fixed_dictionaries({"content": st.one_of(st.none(), st.integers(), st.text(max_size=20))}))},
            optional={"finish_reason": st.sampled_from(["stop", "length", None]),
                      "logprobs": st.one_of(st.none(), st.integers())})), max_size=2), st.text(max_size=3))},
        optional={"usage": st.one_of(st.none(), st.text(max_size=3), st.fixed_dictionaries(
            {"prompt_tokens": st.one_of(st.integers(0, 10), st.text(max_size=2), st.none()),
             "completion_tokens": st.one_of(st.integers(0, 10), st.none())}))}).map(lambda v: json.dumps(v).encode()),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_bodies)
def test_a_judge_endpoint_answering_garbage_with_200_never_crashes_the_judge_agent(body: bytes) -> None:
    """A proxy or a half-compatible server may answer 200 with anything. The judge agent catches
    ``JudgeError`` (dead letter with the judge's reason) and ``ValueError``; any other exception
    would kill the agent, so ``LLMJudge.score`` must turn a malformed body into a ``JudgeError``."""
    settings_ = Settings(openai_base_url="http://judge.test/v1", openai_api_key="k", judge_max_retries=1,
                         judge_backoff_base_s=0.0, judge_backoff_max_s=0.0,
                         label_store_url=f"sqlite:///{_LEDGER_DIR}/labels.db")  # the judge budget's ledger

    async def run() -> None:
        transport = httpx.MockTransport(
            lambda request: httpx.Response(200, content=body, headers={"content-type": "application/json"}))
        async with httpx.AsyncClient(transport=transport) as http:
            judge = judge_from(settings_, RUBRIC, Metrics(CollectorRegistry()), http_client=http)
            try:
                record = await judge.score(_CONVERSATION)
            except JudgeError as exc:
                assert exc.reason in {"judge_unparseable", "judge_unavailable", "judge_error", "judge_bad_response"}
            else:
                assert isinstance(record, ScoreRecord)

    asyncio.run(run())
