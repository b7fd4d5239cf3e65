"""A content store over real HTTP for GenAI messages recorded by reference, and spans that point into it."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

from monitor.tools.otel_traffic import GenAiApp

TOKEN = "Bearer from-settings"


HISTORY = [{"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
           {"role": "user", "parts": [{"type": "text", "content": "where is my parcel?"}]}]


ANSWER = [{"role": "assistant", "parts": [{"type": "text", "content": "It left the depot today."}]}]


class Store:
    """The content store: JSON and JSON-lines objects, a redirect, a slow and an oversized object."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {
            "/store/bucket/c1/in.json": orjson.dumps(HISTORY),
            "/store/bucket/c1/out.jsonl": b"\n".join(orjson.dumps(m) for m in ANSWER) + b"\n",
            "/store/bucket/big.json": b"[" + b" " * 5000 + b"]",
        }
        self.requests: list[tuple[str, str | None]] = []
        store = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                store.requests.append((self.path, self.headers.get("Authorization")))
                if self.path.endswith("/moved.json"):
                    self.send_response(302)
                    self.send_header("Location", "/store/bucket/c1/in.json")
                    self.end_headers()
                    return
                if self.path.endswith("/slow.json"):
                    time.sleep(1.5)
                body = store.objects.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def spans_by_reference(app: GenAiApp, calls: Sequence[tuple[str, str, str]]) -> bytes:
    for cid, sent, got in calls:
        with app.tracer.start_as_current_span("chat gpt-4o-mini", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.conversation.id": cid,
                "gen_ai.input.messages_ref": sent, "gen_ai.output.messages_ref": got}):
            pass
    return app.take_traces("otlp_proto")
