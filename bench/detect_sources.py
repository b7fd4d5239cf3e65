"""The conversations ``bench detect`` replays, each with its DSAT label: USS dialogues or simulator traffic."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from monitor.contracts.events import Conversation
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import REPO_ROOT

SOURCES = ("uss", "simulator")
USS_LABELS = {"spur": "the human dialogue label (SPUR Appendix B, shared/data/README)",
              "overall": "the annotators' mean OVERALL (dialogue-level) rating below 3 (item dsat.overall)"}
SIM_RUBRIC = "spur-copilot"


@dataclass
class Traffic:
    name: str
    conversations: list[Conversation]
    dsat: np.ndarray  # the oracle judge's answer before noise
    groups: np.ndarray  # one group per dialogue: splits never share one
    label: str  # what DSAT means here


def uss_traffic(data_dir: Path, datasets: list[str], limit: int | None, label: str = "spur") -> Traffic:
    """Whole USS dialogues (as a worker receives them) with one of :data:`USS_LABELS`: the dialogue label
    (shared/data/README) or the dialogue-level OVERALL rating below neutral."""
    from bench.use import load_dialogues
    from bench.use_overall import LABELS

    dialogues = [d for name in datasets for d in load_dialogues(data_dir, name, limit)]
    rule = LABELS["overall<3" if label == "overall" else label]
    return Traffic(f"uss ({', '.join(datasets)})", [d.to_conversation() for d in dialogues],
                   np.array([rule(d) for d in dialogues]), np.array([d.dialogue_id for d in dialogues]),
                   USS_LABELS[label])


def simulator_traffic(n: int, seed: int) -> Traffic:
    """``n`` simulator conversations (rubric spur-copilot, default mix); DSAT = any DSAT pattern in the truth."""
    from bench.distill_fidelity import simulated_conversation
    from monitor.tools.simulator.generate import ConversationGenerator

    generator = ConversationGenerator(load_rubric_set(SIM_RUBRIC, REPO_ROOT / "prompts"), seed=seed)
    conversations: list[Any] = []
    for i in range(n):
        sim = generator.generate(f"sim-{i}", 1.7e9 + 60 * i)
        conversations.append(simulated_conversation(sim.events, sim.truth, sim.conversation_id))
    dsat = np.array([any(t.startswith("dsat.") for t in c.simulated_truth or []) for c in conversations])
    return Traffic("simulator", conversations, dsat, np.array([c.conversation_id for c in conversations]),
                   f"the simulator's ground truth: any DSAT pattern of rubric {SIM_RUBRIC}")
