"""Load LLM-Rubric TSVs (or label-store records) into the arrays the calibration network trains on.

Two inputs meet here. The judge's answers: one row per (dialogue, question) with the probability
of every answer option, read from first-token log-probabilities and so *not* renormalised; a
question the judge was not asked is a zero row. The human (or thumbs, CSAT, tenant) labels: one
row per (dialogue, label source) with a 1..K answer per question, where 0 or an empty cell means
"not applicable" and is masked out of the loss rather than dropped, so the other questions of the
same row still teach the network.

The result is a :class:`CalibrationSet`: judge distributions per dialogue
``X [n_dialogues, n_questions, max_options]``, labels per row ``[n_rows, n_questions]`` (0 = NA),
the row's dialogue index and the row's judge (label source) id.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from monitor.contracts.errors import ConfigError

__all__ = [
    "CalibrationDataError",
    "CalibrationSet",
    "JudgeEvaluations",
    "from_records",
    "load_calibration_set",
    "read_dialogue_ids",
    "read_judge_evaluations",
]


class CalibrationDataError(ConfigError):
    """Raised when a calibration input file is missing, malformed or inconsistent.

    ``path``, ``line`` (1-based, header = 1) and ``field`` locate the problem when known.
    """

    def __init__(self, message: str, *, path: Path | str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        where = ":".join(str(p) for p in (path, line) if p is not None)
        where += f" [{field}]" if field else ""
        super().__init__(f"{where}: {message}" if where else message)
        self.path, self.line, self.field = path, line, field


@dataclass(frozen=True)
class JudgeEvaluations:
    """The judge's answer distributions: ``probs[d, q, k]`` = P(option k+1) for dialogue d, question q."""

    dialogue_ids: tuple[str, ...]
    questions: tuple[str, ...]
    probs: np.ndarray
    n_options: np.ndarray

    def index(self) -> dict[str, int]:
        return {d: i for i, d in enumerate(self.dialogue_ids)}


@dataclass(frozen=True)
class CalibrationSet:
    """Judge distributions per dialogue joined with labels per (dialogue, judge) row."""

    X_dialogues: np.ndarray  # [n_dialogues, n_questions, max_options] float32, unnormalised
    dialogue_ids: tuple[str, ...]
    dialogue_index: np.ndarray  # [n_rows] int, row -> dialogue
    labels: np.ndarray  # [n_rows, n_questions] int, 1..K, 0 = not applicable
    judges: np.ndarray  # [n_rows] str, the label source (annotator, thumbs channel, tenant, ...)
    questions: tuple[str, ...]
    n_options: np.ndarray  # [n_questions] int
    target: str
    notes: dict[str, int] = field(default_factory=dict)

    @property
    def X(self) -> np.ndarray:
        """Judge distributions repeated per label row: ``[n_rows, n_questions, max_options]``."""
        rows: np.ndarray = self.X_dialogues[self.dialogue_index]
        return rows

    @property
    def mask(self) -> np.ndarray:
        """True where a label is present (not NA)."""
        return self.labels > 0

    @property
    def target_index(self) -> int:
        return self.questions.index(self.target)

    @property
    def groups(self) -> np.ndarray:
        """Dialogue id per row, for CV grouped by dialogue."""
        groups: np.ndarray = np.asarray(self.dialogue_ids, dtype=object)[self.dialogue_index]
        return groups

    def judge_index(self) -> dict[str, int]:
        """Annotator id -> judge index (sorted ids, so the mapping is stable across runs)."""
        return {j: i for i, j in enumerate(sorted(set(self.judges.tolist())))}

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def _open_tsv(path: Path, required: Sequence[str], *, swapped: tuple[str, str] | None = None
              ) -> tuple[list[str], list[list[str]]]:
    path = Path(path)
    if not path.is_file():
        raise CalibrationDataError("file not found", path=path)
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh, delimiter="\t"))
    if not rows:
        raise CalibrationDataError("empty file, expected a tab-separated header", path=path, line=1)
    header = [h.strip() for h in rows[0]]
    if swapped is not None and swapped[0] in header:
        raise CalibrationDataError(swapped[1], path=path, line=1)
    missing = [c for c in required if c not in header]
    if missing:
        raise CalibrationDataError(
            f"missing column(s) {', '.join(missing)}; header is {', '.join(header)}", path=path, line=1
        )
    return header, rows[1:]


def _number(raw: str, *, path: Path, line: int, name: str) -> float:
    try:
        return float(raw) if raw.strip() else float("nan")
    except ValueError:
        raise CalibrationDataError(f"expected a number, got {raw!r}", path=path, line=line,
                                   field=name) from None


def read_judge_evaluations(path: Path | str, *, max_options: int | None = None,
                           n_options: Mapping[str, int] | None = None) -> JudgeEvaluations:
    """Read ``text_id, criterion, answer1_prob..answerK_prob`` rows (LLM-Rubric format).

    ``max_options`` defaults to the number of ``answerK_prob`` columns. A question's option count is
    taken from ``n_options`` or else inferred as the last option that ever gets probability mass
    (Q8 of LLM-Rubric has 3 options, its 4th column is always zero).
    """
    path = Path(path)
    if max_options is None:
        first = _open_tsv(path, ["text_id", "criterion", "answer1_prob"])[0]
        max_options = next(k for k in range(1, len(first) + 1) if f"answer{k + 1}_prob" not in first)
    cols = [f"answer{k}_prob" for k in range(1, max_options + 1)]
    header, rows = _open_tsv(path, ["text_id", "criterion", *cols], swapped=(
        "annotator_id", "this looks like a human-judgments file (it has annotator_id); "
                        "pass it as --*-judgments, not --*-evaluations"))
    pos = {c: header.index(c) for c in ["text_id", "criterion", *cols]}
    seen: dict[tuple[str, str], int] = {}
    dialogues: dict[str, int] = {}
    questions: dict[str, int] = {}
    for line, row in enumerate(rows, start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) < len(header):
            raise CalibrationDataError(f"expected {len(header)} fields, got {len(row)}", path=path, line=line)
        key = (row[pos["text_id"]].strip(), row[pos["criterion"]].strip())
        if key in seen:
            raise CalibrationDataError(f"duplicate (text_id, criterion) {key}, first on line {seen[key]}",
                                       path=path, line=line)
        seen[key] = line
        dialogues.setdefault(key[0], len(dialogues))
        questions.setdefault(key[1], len(questions))
    probs = np.zeros((len(dialogues), len(questions), max_options), dtype=np.float32)
    for (d, q), line in seen.items():
        row = rows[line - 2]
        for k, c in enumerate(cols):
            value = _number(row[pos[c]], path=path, line=line, name=c)
            if not 0.0 <= value <= 1.0 + 1e-6:
                raise CalibrationDataError(f"probability must be in [0, 1], got {row[pos[c]]!r}",
                                           path=path, line=line, field=c)
            probs[dialogues[d], questions[q], k] = value
    inferred = [max(2, int(np.max(np.nonzero(probs[:, i].any(axis=0))[0], initial=0)) + 1)
                for i in range(len(questions))]
    counts = [int((n_options or {}).get(q, inferred[i])) for i, q in enumerate(questions)]
    return JudgeEvaluations(tuple(dialogues), tuple(questions), probs, np.asarray(counts, dtype=np.int64))


def read_dialogue_ids(path: Path | str) -> list[str]:
    """Read the ``text_id`` column of a dialogue-id list (the paper's CV universe)."""
    path = Path(path)
    header, rows = _open_tsv(path, ["text_id"])
    col = header.index("text_id")
    return [r[col].strip() for r in rows if r and r[col].strip()]


def _label(raw: str, *, k: int, path: Path, line: int, name: str) -> int:
    value = _number(raw, path=path, line=line, name=name)
    if np.isnan(value) or value == 0:
        return 0
    if value != int(value) or not 1 <= value <= k:
        raise CalibrationDataError(f"answer must be an integer in 1..{k} (0 or empty = not applicable), "
                                   f"got {raw!r}", path=path, line=line, field=name)
    return int(value)


def load_calibration_set(judgments: Path | str, evaluations: Path | str, *, target: str = "Q0",
                         ids: Path | str | None = None, judge_column: str = "annotator_id",
                         max_options: int | None = None, drop_incomplete: bool = False) -> CalibrationSet:
    """Join a human-judgments TSV with the judge's evaluations TSV into a :class:`CalibrationSet`.

    Questions are those in both files, in the judgments file's column order. Rows whose dialogue the
    judge never scored, outside ``ids`` when given, or without a target label are left out (as in
    the paper's scripts) and counted in ``notes``; other NA answers stay in, masked.
    ``drop_incomplete`` also leaves out rows with an empty cell, as the reference scripts' pandas
    ``dropna`` does (two rows of the synthetic set), instead of masking the empty answer.
    """
    judgments = Path(judgments)
    for path in (judgments, Path(evaluations)):
        if not path.is_file():
            raise CalibrationDataError("file not found", path=path)
    ev = read_judge_evaluations(evaluations, max_options=max_options)
    if target not in ev.questions:
        raise CalibrationDataError(f"target question {target!r} not in the judge's criteria "
                                   f"{', '.join(ev.questions)}", path=evaluations)
    header, rows = _open_tsv(judgments, ["text_id", judge_column, target], swapped=(
        "criterion", "this looks like a judge-evaluations file (it has criterion); "
                     "pass it as --*-evaluations, not --*-judgments"))
    questions = [h for h in header if h in ev.questions]
    q_ev = [ev.questions.index(q) for q in questions]
    keep = set(read_dialogue_ids(ids)) if ids is not None else None
    d_index, labels, judges = [], [], []
    notes = {"rows_read": 0, "no_judge_evaluation": 0, "outside_ids": 0, "target_missing": 0}
    if drop_incomplete:
        notes["incomplete"] = 0
    ev_index = ev.index()
    for line, row in enumerate(rows, start=2):
        if not any(cell.strip() for cell in row):
            continue
        notes["rows_read"] += 1
        if len(row) < len(header):
            raise CalibrationDataError(f"expected {len(header)} fields, got {len(row)}", path=judgments,
                                       line=line)
        dialogue = row[header.index("text_id")].strip()
        judge = row[header.index(judge_column)].strip()
        if not judge:
            raise CalibrationDataError("empty judge id", path=judgments, line=line, field=judge_column)
        answers = [_label(row[header.index(q)], k=int(ev.n_options[i]), path=judgments, line=line, name=q)
                   for q, i in zip(questions, q_ev, strict=True)]
        if keep is not None and dialogue not in keep:
            notes["outside_ids"] += 1
        elif dialogue not in ev_index:
            notes["no_judge_evaluation"] += 1
        elif answers[questions.index(target)] == 0:
            notes["target_missing"] += 1
        elif drop_incomplete and not all(cell.strip() for cell in row[: len(header)]):
            notes["incomplete"] += 1
        else:
            d_index.append(ev_index[dialogue])
            labels.append(answers)
            judges.append(judge)
    if not labels:
        raise CalibrationDataError(f"no usable rows: {notes}", path=judgments)
    used = sorted(set(d_index))
    remap = np.full(len(ev.dialogue_ids), -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    return CalibrationSet(
        X_dialogues=ev.probs[used][:, q_ev], dialogue_ids=tuple(ev.dialogue_ids[i] for i in used),
        dialogue_index=remap[np.asarray(d_index)], labels=np.asarray(labels, dtype=np.int64),
        judges=np.asarray(judges, dtype=object), questions=tuple(questions),
        n_options=ev.n_options[q_ev], target=target, notes=notes,
    )


def from_records(evaluations: Mapping[str, Mapping[str, Sequence[float]]],
                 labels: Iterable[tuple[str, str, Mapping[str, int]]], *, questions: Sequence[str],
                 n_options: Sequence[int], target: str = "Q0") -> CalibrationSet:
    """Build a set from in-memory records, e.g. the monitor's label store.

    ``evaluations[dialogue][question]`` is the judge's option distribution; ``labels`` yields
    ``(dialogue, judge, {question: 1..K})`` with missing questions meaning not applicable.
    """
    questions = tuple(questions)
    if target not in questions:
        raise CalibrationDataError(f"target {target!r} is not one of the questions {questions}")
    k_max = max(n_options)
    ids = sorted(evaluations)
    X = np.zeros((len(ids), len(questions), k_max), dtype=np.float32)
    for d, dialogue in enumerate(ids):
        for q, name in enumerate(questions):
            dist = list(evaluations[dialogue].get(name, ()))
            if len(dist) > n_options[q]:
                raise CalibrationDataError(f"{dialogue}/{name}: {len(dist)} probabilities for a "
                                           f"{n_options[q]}-option question")
            X[d, q, : len(dist)] = dist
    pos = {d: i for i, d in enumerate(ids)}
    rows = [(pos[d], j, [int(a.get(q, 0)) for q in questions]) for d, j, a in labels
            if d in pos and a.get(target, 0)]
    for d, j, answers in rows:
        bad = [q for q, a, k in zip(questions, answers, n_options, strict=True) if not 0 <= a <= k]
        if bad:
            raise CalibrationDataError(f"{ids[d]}/{j}: answer out of range for {', '.join(bad)}")
    if not rows:
        raise CalibrationDataError("no label rows with a target answer and a judge evaluation")
    d_index, judges, y = zip(*rows, strict=True)
    return CalibrationSet(X, tuple(ids), np.asarray(d_index), np.asarray(y, dtype=np.int64),
                          np.asarray(judges, dtype=object), questions, np.asarray(n_options), target)
