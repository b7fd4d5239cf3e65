"""How real OpenAI-compatible servers refuse structured output, reproduced for the test server.

Each flavour is a behaviour of :class:`monitor.tools.openai_server.OpenAIServer` (``server.default =
"llama_cpp_python"``): it answers like the stand-in judge unless the request carries something that
server refuses, and then with that server's status and error body, as read in its source:

- ``llama_cpp_python``: llama-cpp-python's ``llama_cpp.server`` (0.3.x). Its request model types
  ``response_format.type`` as ``Literal["text", "json_object"]``; its ``RouteErrorHandler`` catches the
  FastAPI validation error and wraps *every* exception it does not recognise as **500**
  ``internal_server_error`` with ``str(exc)`` as the message (llama_cpp/server/errors.py).
- ``llama_server_old``: llama.cpp ``llama-server`` before September 2024 (llama.cpp PR #9527): ``json_schema`` raised a
  ``std::runtime_error`` -> **500** ``server_error`` "response_format type must be one of ...".
- ``llama_server_no_rules``: today's ``llama-server`` when its schema-to-grammar converter cannot take a
  schema: ``JSON schema conversion failed`` as **400** ``invalid_request_error``; here for a schema with
  ``anyOf`` (what an older converter lacked), so the rules schema is refused and the plain one works.
- ``vllm_no_rules``: vLLM's **400** ``BadRequestError`` "The provided JSON schema contains features not
  supported by xgrammar." for a schema with ``anyOf``/``minimum``.
- ``ollama_no_rules``: Ollama's OpenAI layer passes the schema on to its llama-server runner and reports
  the runner's failure as **500** ``api_error`` (openai/openai.go ``NewError``), here for a schema with
  ``anyOf``; the message is the runner's conversion error.
- ``fastapi_422``: a FastAPI server with FastAPI's default validation handler: **422** ``{"detail": [...]}``
  for any ``response_format``.

Answers that are not refused take that server's response shape (:func:`reshape`): llama-server's ``timings``
and ``id``/``bytes`` on each logprob, no ``prompt_tokens_details``; Ollama's ``fp_ollama`` fingerprint and no
``logprobs`` key unless asked (``omitempty``); vLLM's ``stop_reason`` and ``prompt_tokens_details: null``.
"""

from __future__ import annotations

import json
from typing import Any

_PYDANTIC = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input "
    "should be 'text' or 'json_object'\", 'input': 'json_schema', 'ctx': {'expected': \"'text' or 'json_object'\"}}\n"
)
FLAVOURS = ("llama_cpp_python", "llama_server_old", "llama_server_no_rules", "vllm_no_rules", "ollama_no_rules",
            "fastapi_422")


def _has_rules(body: dict[str, Any]) -> bool:
    fmt = body.get("response_format") or {}
    return '"anyOf"' in json.dumps(fmt) or '"minimum"' in json.dumps(fmt)


def refusal(flavour: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """(status, JSON body) when ``flavour`` refuses this request, else None (it answers normally)."""
    fmt_type = (body.get("response_format") or {}).get("type")
    if flavour == "llama_cpp_python" and fmt_type not in (None, "text", "json_object"):
        return 500, {"error": {"message": _PYDANTIC, "type": "internal_server_error", "param": None, "code": None}}
    if flavour == "llama_server_old" and fmt_type == "json_schema":
        message = 'response_format type must be one of "text" or "json_object", but got: json_schema'
        return 500, {"error": {"code": 500, "message": message, "type": "server_error"}}
    if flavour == "llama_server_no_rules" and _has_rules(body):
        message = 'JSON schema conversion failed:\nUnrecognized schema: {"anyOf":[...]}'
        return 400, {"error": {"code": 400, "message": message, "type": "invalid_request_error"}}
    if flavour == "vllm_no_rules" and _has_rules(body):
        message = "The provided JSON schema contains features not supported by xgrammar."
        return 400, {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}
    if flavour == "ollama_no_rules" and _has_rules(body):
        message = 'JSON schema conversion failed:\nUnrecognized schema: {"anyOf":[...]}'
        return 500, {"error": {"message": message, "type": "api_error", "param": None, "code": None}}
    if flavour == "fastapi_422" and fmt_type is not None:
        detail = [{"type": "literal_error", "loc": ["body", "response_format", "type"],
                   "msg": "Input should be 'text' or 'json_object'", "input": fmt_type}]
        return 422, {"detail": detail}
    return None


def _byte_list(token: Any) -> list[int]:
    return list(str(token).encode("utf-8"))


def reshape(flavour: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A completion as ``flavour`` shapes it (fields the OpenAI client must tolerate, or do without)."""
    choice = payload["choices"][0]
    usage = payload.get("usage") or {}
    logprobs = choice.get("logprobs") or {}
    if flavour.startswith("llama_server") or flavour == "llama_cpp_python":
        usage.pop("prompt_tokens_details", None)
        for i, token in enumerate(logprobs.get("content") or []):
            token.update(id=1000 + i, bytes=_byte_list(token["token"]))
            for j, alt in enumerate(token.get("top_logprobs") or []):
                alt.update(id=2000 + j, bytes=_byte_list(alt["token"]))
        if flavour.startswith("llama_server"):
            payload.update(system_fingerprint="b6000-0123abcd", timings={
                "prompt_n": usage.get("prompt_tokens", 0), "prompt_ms": 12.5, "predicted_n": 1, "predicted_ms": 3.1})
    elif flavour == "ollama_no_rules":
        payload["system_fingerprint"] = "fp_ollama"
        usage.pop("prompt_tokens_details", None)
        if choice.get("logprobs") is None:
            choice.pop("logprobs", None)
    elif flavour == "vllm_no_rules":
        choice["stop_reason"] = None
        usage["prompt_tokens_details"] = None
        payload.update(prompt_logprobs=None, kv_transfer_params=None)
    return payload
