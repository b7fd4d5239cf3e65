"""A strict JSON parser for tests of ``--json`` output: bare NaN / Infinity (which ``json`` accepts) fail."""

from __future__ import annotations

import json
from typing import Any


def _refuse(token: str) -> Any:
    raise ValueError(f"not JSON: bare {token} (undefined metrics must be null)")


def loads(text: str) -> Any:
    return json.loads(text, parse_constant=_refuse)
