"""Models built without validation, for values the worker's own code typed or already validated (a decoded OTLP
turn, a distilled score, a conversation assembled from validated turns): validation was most of those hot loops'
cost, and pydantic's ``model_construct`` costs about 5x validation. Never for anything read from outside.

``values`` holds every field, in the model's field order (a validated model's ``__dict__`` keeps that order,
which ``model_dump_json`` follows); ``fields`` is the fields-set validation would record (the fields given). A
fields-set may be shared between models: they are frozen, and pydantic copies one before it changes it. Each use
has a test that its model equals the validated one, bytes included.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

new = object.__new__
set_dict, set_fields, set_extra, set_private = (BaseModel.__dict__[n].__set__ for n in (
    "__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"))


def trusted(model: type[M], values: dict[str, Any], fields: set[str] | frozenset[str]) -> M:
    obj: M = new(model)
    set_dict(obj, values)
    set_fields(obj, fields)
    set_extra(obj, None)
    set_private(obj, None)
    return obj
