"""How `convmon dead-letters` finds a partition's end, against stand-in consumers: one that lists the true end
(Kafka) and one that lists the last record batch's base offset + 1 (the development broker, Tansu)."""

from __future__ import annotations

import asyncio

from aiokafka import ConsumerRecord, TopicPartition

from monitor.tools.dead_letters import PartitionRead, read_partition

TP = TopicPartition("t.dead-letters", 0)


def _record(offset: int) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(topic=TP.topic, partition=0, offset=offset, timestamp=1_700_000_000_000 + offset,
                          timestamp_type=0, key=b"k", value=b"v", checksum=None, serialized_key_size=1,
                          serialized_value_size=1, headers=[])


class Log:
    """A partition of ``size`` records served ``per_fetch`` at a time; the first ``slow`` fetches come back empty
    (a fetch still on its way), and ``answers`` False: no fetch ever answers."""

    def __init__(self, size: int, *, per_fetch: int = 2, slow: int = 0, answers: bool = True) -> None:
        self.size, self.per_fetch, self.slow, self.answers = size, per_fetch, slow, answers
        self.at = 0
        self.known_end: int | None = None
        self.fetches = 0

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self.at = offset

    async def getmany(self, *partitions: TopicPartition, timeout_ms: int = 0,
                      max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]:
        self.fetches += 1
        if not self.answers:
            await asyncio.sleep(timeout_ms / 1000)
            return {}
        if self.slow:
            self.slow -= 1
            return {}
        self.known_end = self.size
        n = min(self.per_fetch, max_records or self.per_fetch, self.size - self.at)
        records = [_record(o) for o in range(self.at, self.at + n)]
        self.at += n
        return {TP: records} if records else {}

    def highwater(self, partition: TopicPartition) -> int | None:
        return self.known_end

    async def position(self, partition: TopicPartition) -> int:
        return self.at


def _read(log: Log, *, listed_end: int, last: int | None = None, timeout_s: float = 5.0) -> PartitionRead:
    async def go() -> PartitionRead:
        deadline = asyncio.get_running_loop().time() + timeout_s
        return await read_partition(log, TP, start=0, listed_end=listed_end, last=last, deadline=deadline)

    return asyncio.run(go())


def test_kafka_lists_the_true_end_and_every_record_is_read() -> None:
    read = _read(Log(7, slow=2), listed_end=7)
    assert [r.offset for r in read.records] == list(range(7)) and read.complete and read.end == 7


def test_kafka_tail_starts_at_the_newest() -> None:
    read = _read(Log(7), listed_end=7, last=3)
    assert [r.offset for r in read.records] == [4, 5, 6] and read.complete


def test_a_listed_end_inside_the_last_batch_is_read_past() -> None:
    # Tansu after one batch of 4 records lists end 1: the reader goes on to the fetched high watermark
    read = _read(Log(4, per_fetch=4), listed_end=1)
    assert [r.offset for r in read.records] == [0, 1, 2, 3] and read.end == 4 and read.complete


def test_tail_behind_a_wrong_listed_end_shows_the_newest() -> None:
    read = _read(Log(4, per_fetch=4, slow=1), listed_end=1, last=1)
    assert [r.offset for r in read.records] == [3]


def test_an_empty_partition_ends_after_one_answered_fetch() -> None:
    log = Log(0)
    read = _read(log, listed_end=0)
    assert read.records == [] and read.complete and log.fetches == 1


def test_no_answer_within_the_time_bound_is_reported_incomplete() -> None:
    read = _read(Log(3, answers=False), listed_end=3, timeout_s=0.5)
    assert not read.complete and read.records == [] and read.end == 3
