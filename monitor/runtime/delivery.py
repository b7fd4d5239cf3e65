"""faust's aiokafka transport with the worker's consumer and producer: no offset commits once a delivery failed.

The consumer asks the app's checkpoint (runtime/checkpoint.py, set on the app when the worker is built) before
every offset commit; faust's transport classes are the supported way to change the consumer. The checkpoint is
typed here by what the consumer asks of it, so this module imports nothing of the worker's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from monitor.runtime.batchsend import BatchingProducer
from monitor.runtime.hotbatches import BatchingConsumer


class CommitGate(Protocol):
    def commit_allowed(self) -> bool:
        """False once any of the worker's deliveries failed."""
        ...


class GuardedConsumer(BatchingConsumer):
    """faust's aiokafka consumer that commits nothing once the app's checkpoint saw a failed delivery (and which
    hands the hot path its records a fetch at a time, runtime/hotbatches.py, and reads a stream partition again
    where its records jump instead of committing over them, runtime/seeks.py).
    Against Tansu its subclass in runtime/log_ends.py also checks table restore ends."""

    async def _commit(self, offsets: Mapping[TP, int]) -> bool:
        gate: CommitGate | None = getattr(self.app, "checkpoint", None)  # app.py's App; None before it is built
        if gate is not None and not gate.commit_allowed():
            return False
        return bool(await super()._commit(offsets))


class GuardedTransport(faust_aiokafka.Transport):
    Consumer = GuardedConsumer
    Producer = BatchingProducer
