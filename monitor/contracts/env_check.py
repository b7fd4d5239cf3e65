"""Unknown ``CONVMON_*`` environment variables, reported at start with the closest known name.

pydantic-settings ignores an environment variable no field reads, so a misspelt setting
(``CONVMON_SAMPLE_RATIO``) would silently leave the default in force.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

# Read by the test and benchmark tooling, not by the settings model.
TOOL_VARIABLES = frozenset({"CONVMON_SOAK_MINUTES", "CONVMON_SOAK_RATE", "CONVMON_SOAK_RETENTION_S",
                            "CONVMON_SOAK_OUT"})

# Settings a release removed: what a user who still sets one should know.
RETIRED = {"CONVMON_ENGINE": "the checkpoint engine is the only engine (CHANGELOG.md, 'Upgrading to this release': "
                             "stop every worker of the old release before starting this one)"}


def known_variables(fields: Iterable[str]) -> set[str]:
    """``CONVMON_<FIELD>`` for each settings field, the OpenAI aliases and the tools' own variables."""
    return {f"CONVMON_{name.upper()}" for name in fields} | TOOL_VARIABLES


def unknown_variables(environ: Mapping[str, str], known: set[str]) -> list[str]:
    """One warning line per ``CONVMON_*`` variable that no setting reads, naming the closest known one."""
    lines = []
    for name in sorted(environ):
        if not name.startswith("CONVMON_") or name in known:
            continue
        if name in RETIRED:
            lines.append(f"warning: {name} is no longer read: {RETIRED[name]}")
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else "; see docs/settings.md"
        lines.append(f"warning: {name} is not a convmon setting and is ignored{hint}")
    return lines


def check_environment(environ: Mapping[str, str]) -> list[str]:
    """:func:`unknown_variables` against the settings model (imported here: it is not light)."""
    from monitor.contracts.settings import Settings

    return unknown_variables(environ, known_variables(Settings.model_fields))
