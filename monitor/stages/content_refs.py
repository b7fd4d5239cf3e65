"""Message content by reference: GenAI calls whose spans carry ``gen_ai.input.messages_ref`` /
``gen_ai.output.messages_ref`` (opentelemetry-util-genai's upload hook: content stored outside the
telemetry, as the conventions recommend for production) instead of the messages themselves.

A resolver fetches the referenced messages (a JSON array, or JSON lines) for the decoder, which then maps
them exactly as inline content: the same turns, the same redaction boundary downstream. The references come
from untrusted spans, so :class:`HttpResolver` only fetches URLs built from a configured template whose host
is on an allow-list, follows no redirect, sends credentials from settings only, bounds time, size and its
cache, and says why a reference could not be fetched (:class:`Unavailable`; the decoder counts the reasons).
Another resolver plugs in by ``CONVMON_OTLP_CONTENT_RESOLVER=package.module:factory`` (called with the
:class:`~monitor.contracts.sections.OtelSettings`, returning an object with :meth:`ContentResolver.fetch`).
"""

from __future__ import annotations

import importlib
import threading
from collections import Counter as Tally
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote, urlsplit

import httpx
import msgspec
from prometheus_client import Counter

from monitor.contracts.errors import ConfigError
from monitor.stages.genai import INPUT, INPUT_REF, OUTPUT, OUTPUT_REF, Call

if TYPE_CHECKING:
    from monitor.contracts.sections import OtelSettings

REASONS = ("bad_reference", "host_not_allowed", "redirect", "not_found", "http_error", "timeout", "unreachable",
           "too_large")


class Unavailable(Exception):
    """A reference that could not be fetched; ``reason`` is one of :data:`REASONS` (a metric label)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class ContentResolver(Protocol):
    def fetch(self, refs: Sequence[str]) -> dict[str, str | Unavailable]:
        """Each reference's messages as JSON text, or why not. Called once per events-topic message."""
        ...


def as_json_array(text: str) -> str:
    """JSON lines (one message a line) as one JSON array; a JSON array as it is."""
    stripped = text.strip()
    if stripped.startswith("[") or not stripped:
        return stripped
    return "[" + ",".join(line for line in stripped.splitlines() if line.strip()) + "]"


class HttpResolver:
    """GET ``url_template`` filled from the reference: ``{ref}`` (the whole reference, percent-encoded),
    ``{bucket}`` (its host part, e.g. the bucket of ``gs://bucket/key``) and ``{key}`` (its path)."""

    def __init__(self, *, url_template: str, allowed_hosts: Sequence[str], authorization: str | None = None,
                 timeout_s: float = 5.0, max_bytes: int = 1 << 20, cache_size: int = 1024, concurrency: int = 8,
                 client: httpx.Client | None = None) -> None:
        self.url_template = url_template
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts)
        self.headers = {"Authorization": authorization} if authorization else {}
        self.max_bytes = max_bytes
        self.cache_size = cache_size
        self.client = client or httpx.Client(timeout=timeout_s, follow_redirects=False, trust_env=False)
        self.pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="convmon-content")
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def url(self, ref: str) -> str:
        parts = urlsplit(ref)
        if not parts.scheme or not (parts.netloc or parts.path):
            raise Unavailable("bad_reference", "the reference is not a URI")
        if ".." in parts.path.split("/"):  # no climbing out of the store's path on an allowed host
            raise Unavailable("bad_reference", "the reference's path climbs with '..'")
        url = self.url_template.format(ref=quote(ref, safe=""), bucket=quote(parts.netloc, safe=""),
                                       key=quote(parts.path.lstrip("/"), safe="/"))
        target = urlsplit(url)
        if target.scheme not in ("http", "https") or (target.hostname or "").lower() not in self.allowed_hosts:
            raise Unavailable("host_not_allowed", f"{target.scheme}://{target.hostname} is not an allowed host")
        return url

    def fetch(self, refs: Sequence[str]) -> dict[str, str | Unavailable]:
        out: dict[str, str | Unavailable] = {}
        missing = []
        with self._lock:
            for ref in dict.fromkeys(refs):
                if (text := self._cache.get(ref)) is not None:
                    self._cache.move_to_end(ref)
                    out[ref] = text
                else:
                    missing.append(ref)
        for ref, got in zip(missing, self.pool.map(self._get, missing), strict=True):
            out[ref] = got
            if isinstance(got, str) and self.cache_size:
                with self._lock:
                    self._cache[ref] = got
                    while len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)
        return out

    def _get(self, ref: str) -> str | Unavailable:
        try:
            url = self.url(ref)
            with self.client.stream("GET", url, headers=self.headers) as response:
                if response.is_redirect:
                    return Unavailable("redirect", f"HTTP {response.status_code}: redirects are not followed")
                if response.status_code == 404:
                    return Unavailable("not_found", "HTTP 404")
                if not response.is_success:
                    return Unavailable("http_error", f"HTTP {response.status_code}")
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > self.max_bytes:
                        return Unavailable("too_large", f"over {self.max_bytes} bytes")
            return as_json_array(body.decode("utf-8", errors="replace"))
        except Unavailable as exc:
            return exc
        except httpx.TimeoutException:
            return Unavailable("timeout", "the content store did not answer in time")
        except httpx.HTTPError as exc:
            return Unavailable("unreachable", type(exc).__name__)


def resolved(resolver: ContentResolver, calls: Iterable[Call], outcomes: Tally[str], counter: Counter) -> list[Call]:
    """The calls, those that carry their messages by reference given the fetched messages (all of one
    events-topic message's references fetched at once, concurrently). A call whose content could not be
    fetched is counted by reason in ``counter`` and left out (``outcomes["content_unavailable"]``)."""
    calls = list(calls)
    wanted = [ref for c in calls if INPUT not in c.attributes and OUTPUT not in c.attributes
              for ref in (c.attributes.get(INPUT_REF), c.attributes.get(OUTPUT_REF)) if type(ref) is str]
    if not wanted:
        return calls
    fetched = resolver.fetch(wanted)
    out: list[Call] = []
    for call in calls:
        a = call.attributes
        if INPUT in a or OUTPUT in a or (INPUT_REF not in a and OUTPUT_REF not in a):
            out.append(call)
            continue
        attrs, failed = dict(a), None
        for ref_key, key in ((INPUT_REF, INPUT), (OUTPUT_REF, OUTPUT)):
            ref = a.get(ref_key)
            if type(ref) is str:
                got = fetched.get(ref, Unavailable("other", "the resolver returned nothing"))
                if isinstance(got, Unavailable):
                    failed = got.reason if got.reason in REASONS else "other"
                    break
                attrs[key] = got
        counter.labels(failed or "fetched").inc()
        if failed:
            outcomes["content_unavailable"] += 1
            continue
        out.append(msgspec.structs.replace(call, attributes=attrs))
    return out


def build_resolver(otel: OtelSettings) -> ContentResolver | None:
    """The resolver the settings name: none, ``http``, or ``package.module:factory``."""
    name = otel.otlp_content_resolver
    if name is None:
        return None
    if name == "http":
        assert otel.otlp_content_url_template is not None  # the settings' validator checked it
        secret = otel.otlp_content_authorization
        return HttpResolver(url_template=otel.otlp_content_url_template,
                            allowed_hosts=otel.otlp_content_allowed_hosts,
                            authorization=secret.get_secret_value() if secret is not None else None,
                            timeout_s=otel.otlp_content_timeout_s, max_bytes=otel.otlp_content_max_bytes,
                            cache_size=otel.otlp_content_cache_size)
    module, _, attr = name.partition(":")
    try:
        factory = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"CONVMON_OTLP_CONTENT_RESOLVER={name!r}: cannot load it ({exc})") from None
    resolver: ContentResolver = factory(otel)
    return resolver
