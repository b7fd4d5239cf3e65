"""User Satisfaction Simulation (USS) dataset: parser, turn ratings and SPUR conversation labels.

USS (Sun et al., SIGIR 2021) rates every user turn by 3-7 annotators on a 1-5 scale. Files hold
one line per utterance, ``ROLE<TAB>TEXT<TAB>ACTION<TAB>SATS``, dialogues separated by a blank
line, each ending with ``USER<TAB>OVERALL<TAB><TAB>r1,r2,...`` (the dialogue-level rating).

Empty utterances (a line whose TEXT is empty or blank; upstream ReDial has seven) are kept as
turns of the :class:`UssDialogue`, with their ratings, so labels are computed from every annotation
as published; they are *not* turns of the convmon :class:`Conversation` (an event needs text), so
:meth:`UssDialogue.to_conversation`, :func:`rated_prefixes` and ``convmon replay`` leave them out
and :attr:`UssDialogue.empty_turns` counts them. Every reader of USS goes through :func:`load_uss`.

Two labelling rules matter and are kept apart on purpose:

* :func:`turn_rating` is the upstream authors' rule (most frequent rating, ties toward the lower
  value); "dissatisfied turn" means ``turn_rating <= 2``.
* :func:`conversation_label` is SPUR's Appendix B rule on annotator *means*, giving SAT / DSAT /
  NEUTRAL and the turn index at which a contradicting conversation is cut.

References: Sun et al., "Simulating User Satisfaction for the Evaluation of Task-oriented
Dialogue Systems", SIGIR 2021; Lin et al., "Interpretable User Satisfaction Estimation for
Conversational Systems with Large Language Models" (SPUR), ACL 2024, Appendix B.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation, Turn

Label = Literal["SAT", "DSAT", "NEUTRAL"]
_ROLES = {"USER": "user", "SYSTEM": "assistant"}


class UssFormatError(ConfigError):
    """Raised when a USS file breaks the four-field format; ``path`` and ``line`` locate it."""

    def __init__(self, message: str, *, path: str, line: int) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path, self.line = path, line


@dataclass(frozen=True)
class UssTurn:
    """One utterance; ``ratings`` is empty on system turns, ``text`` may be empty (see the module doc)."""

    role: Literal["user", "assistant"]
    text: str
    action: str = ""
    ratings: tuple[int, ...] = ()

    @property
    def empty(self) -> bool:
        """No text to read: left out of conversations and events, its ratings still count."""
        return not self.text.strip()

    @property
    def rating(self) -> int | None:
        """The upstream turn rating (see :func:`turn_rating`), or None for system turns."""
        return turn_rating(self.ratings) if self.ratings else None


@dataclass(frozen=True)
class UssDialogue:
    dialogue_id: str
    turns: tuple[UssTurn, ...]
    overall: tuple[int, ...] = field(default=())

    @property
    def user_turns(self) -> list[UssTurn]:
        return [t for t in self.turns if t.role == "user"]

    @property
    def dissatisfied(self) -> bool:
        """The user is dissatisfied at some turn: any upstream turn rating <= 2."""
        return any((t.rating or 3) <= 2 for t in self.user_turns)

    @property
    def empty_turns(self) -> int:
        """Utterances without text, which conversations and events leave out."""
        return sum(t.empty for t in self.turns)

    @property
    def label(self) -> Label:
        return conversation_label(self)[0]

    def to_conversation(self, *, cut: bool = False) -> Conversation:
        """As a convmon :class:`Conversation` without the empty utterances, re-indexed from 0;
        ``cut=True`` applies SPUR's contradiction cut (positions count every utterance)."""
        turns = self.turns[: conversation_label(self)[1]] if cut else self.turns
        kept = [t for t in turns if not t.empty]
        if not kept:
            raise ConfigError(f"USS dialogue {self.dialogue_id}: no non-empty utterance before its contradiction cut")
        return Conversation(
            conversation_id=self.dialogue_id,
            turns=[Turn(index=i, role=t.role, text=t.text) for i, t in enumerate(kept)],
            metadata={"dataset": "uss", "source": self.dialogue_id.rsplit("-", 1)[0]},
        )


def rated_prefixes(dialogue: UssDialogue) -> list[tuple[Conversation, UssTurn]]:
    """Each prefix of the dialogue that ends at a rated user turn, with that turn.

    Turn ratings judge the conversation *so far*, so "is the user dissatisfied at the latest turn"
    is a conversation-level label on the prefix; prefixes share ``metadata["dialogue_id"]`` (the
    group to keep on one side of any split). Prefix ids are ``<dialogue id>#<turn position>``, the
    position counting every utterance; an empty user turn has no text to end a prefix with and is
    left out.
    """
    full = dialogue.to_conversation()
    out = []
    kept = 0  # conversation turns up to and including this position
    for position, turn in enumerate(dialogue.turns):
        kept += not turn.empty
        if turn.role == "user" and turn.ratings and not turn.empty:
            prefix = full.model_copy(update={
                "conversation_id": f"{dialogue.dialogue_id}#{position}", "turns": full.turns[:kept],
                "metadata": {**full.metadata, "dialogue_id": dialogue.dialogue_id},
            })
            out.append((prefix, turn))
    return out


def turn_rating(ratings: tuple[int, ...] | list[int]) -> int:
    """Most frequent annotator rating, ties broken toward the lower value (upstream rule).

    >>> turn_rating((3, 3, 2, 2)), turn_rating((5, 4, 4))
    (2, 4)
    """
    if not ratings:
        raise ValueError("turn_rating needs at least one rating")
    counts = Counter(ratings)
    return min(counts, key=lambda r: (-counts[r], r))


def _turn_polarity(ratings: tuple[int, ...]) -> Label:
    mean = sum(ratings) / len(ratings)
    return "SAT" if mean > 3 else "DSAT" if mean < 3 else "NEUTRAL"


def conversation_label(dialogue: UssDialogue) -> tuple[Label, int]:
    """SPUR Appendix B label and the number of turns kept after the contradiction cut.

    The first non-neutral user turn (by annotator mean) sets the label; the conversation is cut
    before the first later user turn of the opposite polarity. All-neutral gives NEUTRAL.
    """
    label: Label = "NEUTRAL"
    for position, turn in enumerate(dialogue.turns):
        if turn.role != "user" or not turn.ratings:
            continue
        polarity = _turn_polarity(turn.ratings)
        if polarity == "NEUTRAL":
            continue
        if label == "NEUTRAL":
            label = polarity
        elif polarity != label:
            return label, position
    return label, len(dialogue.turns)


def _parse_ratings(raw: str, *, path: str, line: int) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in raw.split(",") if v.strip())
    except ValueError as exc:
        raise UssFormatError(f"SATS must be comma-separated integers, got {raw!r}", path=path, line=line) from exc
    if any(not 1 <= v <= 5 for v in values):
        raise UssFormatError(f"ratings must be in 1..5, got {raw!r}", path=path, line=line)
    return values


def _blocks(text: str) -> Iterator[list[tuple[int, str]]]:
    block: list[tuple[int, str]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            block.append((number, line.rstrip("\r")))
        elif block:
            yield block
            block = []
    if block:
        yield block


def parse_uss(text: str, *, source: str = "uss", path: str = "<string>") -> list[UssDialogue]:
    """Parse USS text into dialogues with ids ``<source>-<0-based index, 4 digits>``."""
    dialogues = []
    for index, block in enumerate(_blocks(text)):
        turns: list[UssTurn] = []
        overall: tuple[int, ...] = ()
        for number, line in block:
            fields = line.split("\t")
            if len(fields) != 4:
                raise UssFormatError(f"expected 4 tab-separated fields, got {len(fields)}", path=path, line=number)
            role, utterance, action, sats = fields
            if role not in _ROLES:
                raise UssFormatError(f"ROLE must be USER or SYSTEM, got {role!r}", path=path, line=number)
            ratings = _parse_ratings(sats, path=path, line=number)
            if role == "USER" and utterance == "OVERALL":
                overall = ratings
                continue
            if overall:
                raise UssFormatError("utterance after the OVERALL line", path=path, line=number)
            turns.append(UssTurn(role=_ROLES[role], text=utterance, action=action, ratings=ratings))  # type: ignore[arg-type]
        if all(t.empty for t in turns):
            raise UssFormatError("dialogue without a non-empty utterance", path=path, line=block[0][0])
        dialogues.append(UssDialogue(dialogue_id=f"{source}-{index:04d}", turns=tuple(turns), overall=overall))
    return dialogues


def load_uss(path: Path | str) -> list[UssDialogue]:
    """Load one USS file (``MWOZ.txt``, ``SGD.txt``, ...); the file stem becomes the id prefix."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read USS file {path}: {exc}") from exc
    return parse_uss(text, source=path.stem, path=str(path))
