"""A small, real OpenAI-compatible HTTP server for tests, integration runs and benchmarks.

    with OpenAIServer(latency_s=0.01) as server:        # 127.0.0.1, a free port, its own thread
        settings = Settings(openai_base_url=server.url, openai_api_key="test")
        server.script("429", "good")                      # behaviours for the next requests, in order

POST /v1/chat/completions (and Azure's /openai/deployments/<name>/chat/completions) answer, by
default, *rubric-aware* (:mod:`monitor.tools.stand_in_judge`): SPUR JSON / free text, Likert ratings
or yes/no logprobs depending on the request. Scripted behaviours: ``good`` | ``text`` (free-text
list) | ``malformed`` | ``missing`` (last two items dropped) | ``429`` (Retry-After: ``retry_after``) |
``500`` | ``503`` | ``400`` | ``401`` | ``slow`` (``slow_s`` first) | ``truncated`` (half the answer,
finish_reason=length) | ``reject_format`` (400 when response_format is set) | ``no_usage`` | ``no_logprobs`` |
``padded`` (a valid answer padded with whitespace to ``padded_bytes``) | ``fenced`` (the JSON answer in a
```json code fence; ``fence_free_text=True`` answers so whenever no response_format is sent) | a real server's flavour
(:mod:`monitor.tools.server_flavours`: ``llama_cpp_python``, ``vllm_no_rules``, ...), or any
callable ``(body) -> (status, json, headers)``. POST /v1/embeddings returns deterministic hashed
bag-of-words vectors (``dimensions`` honoured, float or base64). Every request body is kept in
``server.requests``.

``python -m monitor.tools.openai_server --port 8000`` serves the stand-in judge until Ctrl-C: a judge endpoint
for the README's quickstart when no real one is at hand (its verdicts come from keywords, not a model).
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from aiohttp import web

from monitor.tools.server_flavours import FLAVOURS, refusal, reshape
from monitor.tools.stand_in_judge import answer, embed

Behaviour = str | Callable[[dict[str, Any]], tuple[int, dict[str, Any], dict[str, str]]]

class OpenAIServer:
    def __init__(
        self, *, latency_s: float = 0.0, slow_s: float = 2.0, retry_after: str = "0", default: Behaviour = "good",
        padded_bytes: int = 2_000_000, port: int = 0, keep_requests: bool = True, fence_free_text: bool = False,
    ) -> None:
        self.latency_s = latency_s
        self.padded_bytes = padded_bytes
        self.slow_s = slow_s
        self.retry_after = retry_after
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.chat_calls = 0  # chat completions answered or refused, kept or not (what a judge call costs)
        self._script: deque[Behaviour] = deque()
        self._lock = threading.Lock()
        self._seen_prefixes: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = port  # 0: a free port, known after start()
        self.keep_requests = keep_requests  # False for a long-lived server: bodies are not kept
        self.fence_free_text = fence_free_text  # answer requests without response_format in a ```json fence

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def azure_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *behaviours: Behaviour) -> None:
        with self._lock:
            self._script.extend(behaviours)

    def _next(self) -> Behaviour:
        with self._lock:
            return self._script.popleft() if self._script else self.default

    # --- lifecycle ------------------------------------------------------------------------
    def start(self) -> OpenAIServer:
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            app = web.Application(client_max_size=64 * 1024 * 1024)
            app.router.add_post("/v1/chat/completions", self._chat)
            app.router.add_post("/openai/deployments/{deployment}/chat/completions", self._chat)
            app.router.add_post("/v1/embeddings", self._embeddings)
            # a handler whose client hung up is cancelled (a "slow" answer must not hold stop() for its full sleep)
            self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", self.port)
            self._loop.run_until_complete(site.start())
            self.port = int(self._runner.addresses[0][1])  # the bound port (port 0 asks for a free one)
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="openai-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the test OpenAI server did not start within 10 s")
        return self

    def stop(self) -> None:
        if self._loop is None or self._runner is None:
            return
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- handlers -------------------------------------------------------------------------
    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.chat_calls += 1
        if self.keep_requests:
            self.requests.append(body)
            self.paths.append(request.path)
        behaviour = self._next()
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if callable(behaviour):
            status, payload, headers = behaviour(body)
            return web.json_response(payload, status=status, headers=headers)
        if behaviour in FLAVOURS:  # a real server's refusals (monitor/tools/server_flavours.py), else an answer
            refused = refusal(behaviour, body)
            if refused is not None:
                return web.json_response(refused[1], status=refused[0])
            return web.json_response(reshape(behaviour, self._completion(body, "good")))
        error = _errors(behaviour, body, self.retry_after)
        if error is not None:
            return error
        if behaviour == "slow":
            await asyncio.sleep(self.slow_s)
        if behaviour in ("padded", "padded_chunked"):
            return await self._padded(request, self._completion(body, "good"), chunked=behaviour == "padded_chunked")
        return web.json_response(self._completion(body, behaviour))

    async def _padded(self, request: web.Request, payload: dict[str, Any], *, chunked: bool) -> web.StreamResponse:
        """A valid completion followed by whitespace up to ``padded_bytes`` (still one JSON document)."""
        data = json.dumps(payload).encode()
        padding = b" " * max(0, self.padded_bytes - len(data))
        if not chunked:
            return web.Response(body=data + padding, content_type="application/json")
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(data)
        try:
            for start in range(0, len(padding), 65536):
                await response.write(padding[start:start + 65536])
            await response.write_eof()
        except ConnectionError:  # the client stopped reading: what a capped client does
            pass
        return response

    def _completion(self, body: dict[str, Any], behaviour: str) -> dict[str, Any]:
        if behaviour == "good" and self.fence_free_text and "response_format" not in body:
            behaviour = "fenced"
        text, logprobs = answer(body, behaviour)
        finish = "stop"
        if behaviour == "truncated":
            text, finish = text[: len(text) // 2], "length"
        messages = body.get("messages") or []
        system = str(messages[0].get("content", "")) if messages else ""
        cached = len(system) // 4 if system in self._seen_prefixes else 0
        self._seen_prefixes.add(system)
        prompt = sum(len(str(m.get("content") or "")) for m in messages) // 4 + 1
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": finish, "logprobs": logprobs}
        payload: dict[str, Any] = {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "unknown"), "choices": [choice],
            "usage": {"prompt_tokens": prompt, "completion_tokens": len(text) // 4 + 1,
                      "total_tokens": prompt + len(text) // 4 + 1, "prompt_tokens_details": {"cached_tokens": cached}},
        }
        if behaviour == "no_usage":
            del payload["usage"]
        return payload

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        if self.keep_requests:
            self.requests.append(body)
            self.paths.append(request.path)
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        dims = int(body.get("dimensions") or 64)
        data = []
        for index, text in enumerate(texts):
            vector = embed(str(text), dims)
            value: Any = vector
            if body.get("encoding_format") == "base64":
                value = base64.b64encode(struct.pack(f"<{dims}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": value})
        tokens = sum(len(str(t).split()) for t in texts)
        return web.json_response({"object": "list", "data": data, "model": body.get("model", "unknown"),
                                  "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


def _errors(behaviour: str, body: dict[str, Any], retry_after: str) -> web.Response | None:
    def err(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
        payload = {"error": {"message": message, "type": "test_error", "code": str(status)}}
        return web.json_response(payload, status=status, headers=headers)

    if behaviour == "429":
        return err(429, "Rate limit reached", {"retry-after": retry_after})
    if behaviour in ("500", "503", "400", "401"):
        return err(int(behaviour), f"scripted {behaviour}")
    if behaviour == "reject_format" and "response_format" in body:
        return err(400, "response_format is not supported by this model")
    return None


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Serve the stand-in judge (OpenAI-compatible) until Ctrl-C.")
    parser.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (default 8000)")
    args = parser.parse_args(argv)
    server = OpenAIServer(port=args.port, keep_requests=False).start()
    print(f"stand-in judge on {server.url} (OPENAI_BASE_URL); Ctrl-C to stop", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
