"""The redaction boundary: input events are redacted once, as they are decoded, so nothing
downstream (the sessions changelog, the re-key hop, the judge and labels topics, the scores topic's
metadata, the classifiers) ever holds what the redactor removes.

Metadata values are always redacted. Turn text is too, unless ``pii_raw_internal_topics`` keeps it raw
for teams that own the cluster: then the judge request, the label store, dead letters and OTLP events are
still redacted where they are written, but the internal topics and the classifiers see raw text (the
classifiers were trained on redacted labels: a train/serve skew, docs/security.md). A redacted event is
re-encoded, so a re-keyed copy never carries the original bytes; dead letters of unusable input are
redacted by the dead-letter writer (``dead_letter_raw`` keeps them raw, opt-in).
"""

from __future__ import annotations

from monitor.contracts.events import Conversation, EndEvent, Event, RejectedTurn, TurnEvent
from monitor.judge.redact import Redactor
from monitor.stages.inputs import Decoded, InputDecoder, JsonInput


class InputRedaction:
    def __init__(self, redactor: Redactor, *, text: bool = True) -> None:
        self.redactor = redactor
        self.text = text  # False: pii_raw_internal_topics (metadata is redacted all the same)

    def _metadata(self, metadata: dict[str, str]) -> dict[str, str] | None:
        """The redacted metadata, or None when nothing in it changed (no copy on the common path)."""
        out = self.redactor.redact_metadata(metadata) if metadata else metadata
        return out if out != metadata else None

    def event(self, event: Event) -> Event:
        """``event`` itself when there was nothing to redact, else a redacted copy."""
        if isinstance(event, RejectedTurn):  # convmon's marker: an id, a turn index and a field name
            return event
        update: dict[str, object] = {}
        metadata = self._metadata(event.metadata)
        if metadata is not None:
            update["metadata"] = metadata
        if isinstance(event, TurnEvent) and self.text:
            text = self.redactor.redact(event.text)
            if text != event.text:
                update["text"] = text
        elif isinstance(event, Conversation) and self.text:
            turns = [t.model_copy(update={"text": r}) if (r := self.redactor.redact(t.text)) != t.text else t
                     for t in event.turns]
            if any(new is not old for new, old in zip(turns, event.turns, strict=True)):
                update["turns"] = turns
        elif not isinstance(event, TurnEvent | Conversation | EndEvent):
            raise TypeError(f"not an input event: {type(event).__name__}")
        return event.model_copy(update=update) if update else event


class RedactingInput:
    """An input decoder whose events come out redacted; a changed event has no bytes (``Decoded``'s None): whoever
    sends it on (the re-key hop, a dead letter) encodes the redacted event, so the original bytes never travel."""

    def __init__(self, inner: InputDecoder, redaction: InputRedaction) -> None:
        self.inner = inner
        self.redaction = redaction
        # OTLP calls repeat the chat history
        self.repeating = bool(getattr(inner, "repeating", not isinstance(inner, JsonInput)))

    def decode(self, raw: bytes | None, *, rekeyed: bool, timestamp: float | None = None) -> Decoded:
        decoded = self.inner.decode(raw, rekeyed=rekeyed, timestamp=timestamp)
        events: list[tuple[Event, bytes | None]] = []
        for event, event_raw in decoded.events:
            redacted = self.redaction.event(event)
            events.append((event, event_raw) if redacted is event else (redacted, None))  # None: encoded if re-keyed
        return Decoded(events, decoded.problem, decoded.unknown_fields, decoded.skipped)
