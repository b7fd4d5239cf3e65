"""``bench throughput``'s whole-conversation input (USS dialogues or the simulator) and the live model it scores with.

The turn-event input is built from the same dialogues in ``turns.py``.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence
from pathlib import Path

from bench.distill_fidelity import labelled_stream
from distill.datasets import UssDialogue, load_uss
from distill.featurizers.base import user_turns_in_context
from distill.registry import ModelRegistry
from distill.serving import KIND
from distill.train import train_items
from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation, encode
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.settings import DistillSettings


def publish_model(distill: DistillSettings, rubric: RubricSet, featurizer: str, n_labels: int, seed: int) -> str:
    """Train on simulated teacher labels and make the result the live distilled model."""
    data = labelled_stream(rubric, n_labels, seed=seed, prefix="bench-train")
    trained = train_items(data, featurizer, rubric=rubric, random_state=seed)
    registry = ModelRegistry(distill.model_registry)
    return registry.publish(KIND, trained.model.to_arrays(), trained.model.manifest(), promote=True)


def conversation_messages(rubric: RubricSet, n: int, *, seed: int, prefix: str) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs of finished-conversation records, as a producer would publish them."""
    data = labelled_stream(rubric, n, seed=seed, prefix=prefix)
    plain = [c.model_copy(update={"simulated_truth": None}) for c in data.conversations]
    return [(c.conversation_id.encode(), encode(c)) for c in plain]


def uss_files(data_dir: Path) -> list[Path]:
    """The USS files (*.txt) of a shared data directory or of its uss/ folder; ConfigError if none."""
    folder = Path(data_dir) / "uss" if (Path(data_dir) / "uss").is_dir() else Path(data_dir)
    files = sorted(folder.glob("*.txt"))
    if not files:
        raise ConfigError(f"no USS files (*.txt) under {data_dir}; pass --data DIR or --source simulator")
    return files


@functools.lru_cache(maxsize=2)
def uss_dialogues(data_dir: Path) -> tuple[UssDialogue, ...]:
    """Every dialogue of the USS files, parsed once: the warm-up and the measured set both draw on them."""
    return tuple(d for path in uss_files(data_dir) for d in load_uss(path))


def uss_messages(data_dir: Path, n: int, *, seed: int, prefix: str) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs of real finished conversations: USS dialogues, shuffled, ids unique per ``prefix``."""
    dialogues = list(uss_dialogues(Path(data_dir)))
    if n > len(dialogues):
        raise ConfigError(f"{uss_files(data_dir)[0].parent} holds {len(dialogues)} dialogues, fewer than the {n} "
                          f"conversations asked for; pass --conversations {len(dialogues)} or less, or --source "
                          "simulator")
    random.Random(seed).shuffle(dialogues)
    out = []
    for i, dialogue in enumerate(dialogues[:n]):
        conversation = dialogue.to_conversation().model_copy(update={"conversation_id": f"{prefix}-{i}"})
        out.append((conversation.conversation_id.encode(), encode(conversation)))
    return out


def distinct_texts_per_conversation(messages: Sequence[tuple[bytes, bytes]], batch: int) -> float:
    """What an embedding featurizer encodes per conversation: distinct user / context texts per batch.

    Batches are cut in message order; the worker's batches mix partitions, so this is approximate.
    """
    texts = 0
    for i in range(0, len(messages), batch):
        pairs = [user_turns_in_context(Conversation.model_validate_json(v)) for _, v in messages[i : i + batch]]
        texts += len({text for ps in pairs for pair in ps for text in (pair.user, pair.context) if text})
    return texts / max(len(messages), 1)
