"""``convmon ui``: the flagged conversations, the judge's reasons, the review queue and judge-vs-human agreement.

A Flask application with server-side Jinja2 templates (autoescaped) over the label store's database. Read-only
unless ``ui_labels`` is set; label writes are POSTs carrying the session's CSRF token. With ``ui_token`` every
request needs the token (``Authorization: Bearer``, or once on ``/login`` for a session cookie). ``/metrics``
exports the agreement estimates (:class:`monitor.contracts.metrics_review.ReviewMetrics`).
"""

from __future__ import annotations

import csv
import hmac
import io
import re
import secrets
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from flask import Flask, Response, abort, jsonify, redirect, render_template, request, session, url_for
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from werkzeug.wrappers import Response as BaseResponse

from monitor.contracts.errors import ConfigError, StoreError
from monitor.contracts.metrics_review import ReviewMetrics
from monitor.contracts.settings import Settings
from monitor.tools.review.data import Filters, ReviewData
from monitor.tools.review.export import export_metrics

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
EXPORTED = ("scored_at", "conversation", "item_id", "polarity", "scorer", "value", "explanation", "judge",
            "model_version", "r", "text")
OPEN = ("login", "static")


def window_of(args: dict[str, str], now: float) -> tuple[float, float]:
    """``window=30m`` (ending now or at ``to``), or ``from``/``to`` as epoch seconds or Grafana's milliseconds."""
    def epoch(text: str) -> float:
        value = float(text)
        return value / 1000 if value > 1e11 else value

    try:
        until = epoch(args["to"]) if args.get("to") else now
        if args.get("from"):
            return epoch(args["from"]), until
        match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd])", (args.get("window") or "1h").strip())
        if not match:
            raise ValueError
        return until - float(match.group(1)) * UNITS[match.group(2)], until
    except ValueError:
        abort(400, "window: a number and a unit s, m, h or d (30m, 6h); from/to: epoch seconds or milliseconds")


def create_app(settings: Settings, data: ReviewData | None = None) -> Flask:
    data = data or ReviewData(settings)
    app = Flask(__name__)
    app.secret_key = secrets.token_bytes(32)
    app.config.update(SESSION_COOKIE_HTTPONLY=True, SESSION_COOKIE_SAMESITE="Strict")
    registry = CollectorRegistry()
    metrics = ReviewMetrics(registry)
    token = settings.ui_token.get_secret_value() if settings.ui_token else None
    rubric = data.rubric

    @app.before_request
    def _access() -> BaseResponse | None:
        if token is not None and request.endpoint not in OPEN and not session.get("signed_in"):
            given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            if not hmac.compare_digest(given.encode(), token.encode()):
                if request.method == "GET" and request.endpoint != "metrics_page":
                    return redirect(url_for("login", next=request.full_path))
                abort(401)
        if request.method == "POST" and request.endpoint != "login":
            sent = request.form.get("csrf", "")
            if not sent or not hmac.compare_digest(sent, session.get("csrf", "")):
                abort(403, "the form's CSRF token is missing or stale: reload the page")
        return None

    @app.context_processor
    def _common() -> dict[str, Any]:
        if "csrf" not in session:
            session["csrf"] = secrets.token_urlsafe(24)
        return {"csrf": session["csrf"], "rubric": rubric, "labels_on": settings.ui_labels,
                "when": lambda t: datetime.fromtimestamp(float(t), UTC).strftime("%Y-%m-%d %H:%M:%S")}

    @app.route("/login", methods=["GET", "POST"])
    def login() -> Any:
        if token is None:
            return redirect(url_for("flagged"))
        wrong = False
        if request.method == "POST":
            if hmac.compare_digest(request.form.get("token", "").encode(), token.encode()):
                session["signed_in"] = True
                target = request.args.get("next", "")
                return redirect(target if target.startswith("/") and not target.startswith("//") else "/")
            wrong = True
        return render_template("login.html", wrong=wrong), 401 if wrong else 200

    @app.get("/")
    def home() -> BaseResponse:
        return redirect(url_for("flagged"))

    def filters() -> Filters:
        args = request.args.to_dict()
        since, until = window_of(args, time.time())
        item = args.get("item") or None
        if item is not None and item not in rubric.item_ids:
            abort(400, f"item {item!r} is not an item of rubric set {rubric.key}")
        scorer = args.get("scorer") or None
        if scorer not in (None, "llm", "distilled"):
            abort(400, "scorer: llm or distilled")
        dimension, _, value = (args.get("dimension") or "").partition("=")
        if dimension and dimension not in settings.metric_dimensions:
            abort(400, f"dimension {dimension!r} is not one of CONVMON_METRIC_DIMENSIONS")
        return Filters(item=item, scorer=scorer, dimension=dimension or None, value=value or None,
                       since=since, until=until)

    @app.get("/flagged")
    def flagged() -> str:
        chosen = filters()
        rows = data.flagged_rows(chosen)
        query = {k: v for k, v in request.args.items() if v}
        return render_template("flagged.html", rows=rows, f=chosen, args=request.args, query=urlencode(query),
                               dimensions=settings.metric_dimensions)

    @app.get("/flagged.<fmt>")
    def export(fmt: str) -> Response:
        rows = [{k: row.get(k) for k in EXPORTED} for row in data.flagged_rows(filters())]
        if fmt == "json":
            return jsonify(rows)
        if fmt != "csv":
            abort(404)
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=EXPORTED)
        writer.writeheader()
        writer.writerows(rows)
        return Response(out.getvalue(), mimetype="text/csv",
                        headers={"Content-Disposition": "attachment; filename=flagged.csv"})

    @app.get("/c/<name>")
    def conversation(name: str) -> str:
        cid = data.resolve(name)
        if cid is None:
            abort(404, "no stored conversation has this reference")
        judged = next((j for j in data.judged() if j.conversation_id == cid), None)
        return render_template("conversation.html", c=data.conversation(cid), judged=judged,
                               saved=request.args.get("saved"))

    @app.post("/c/<name>/review")
    def review(name: str) -> BaseResponse:
        if not settings.ui_labels:
            abort(403, "the page is read-only: set CONVMON_UI_LABELS=true to label conversations")
        cid = data.resolve(name)
        if cid is None:
            abort(404, "no stored conversation has this reference")
        answers = {item: request.form.get(f"item:{item}", "") for item in rubric.item_ids}
        try:
            saved = data.record_review(cid, answers, request.form.get("overall"))
        except LookupError as exc:
            abort(409, str(exc))
        return redirect(url_for("conversation", name=name, saved=saved))

    @app.get("/review")
    def queue() -> str:
        rows = [{"conversation": data.shown(j.conversation_id), "pi": j.pi, "flagged": j.flagged,
                 "reviewed": j.reviewed, "at": j.labelled_at} for j in data.queue()]
        return render_template("review.html", rows=rows)

    @app.get("/agreement")
    def agreement() -> str:
        return render_template("agreement.html", stats=data.agreement(), floor=settings.review_agreement_floor,
                               min_labels=settings.review_min_labels)

    @app.get("/metrics")
    def metrics_page() -> Response:
        export_metrics(metrics, data.agreement(), settings)
        return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)

    @app.errorhandler(400)
    @app.errorhandler(403)
    @app.errorhandler(404)
    @app.errorhandler(409)
    def _error(exc: Any) -> tuple[str, int]:
        return render_template("error.html", error=exc), int(exc.code)

    return app


def serve(settings: Settings) -> None:
    """Serve the page on ``ui_host:ui_port`` with waitress (a production WSGI server, threaded)."""
    import waitress

    data = ReviewData(settings)
    try:
        data.purge()  # reviewers' answers older than the review window
    except StoreError as exc:
        raise ConfigError(f"label store unreachable (CONVMON_LABEL_STORE_URL): {exc}") from exc
    waitress.serve(create_app(settings, data), host=settings.ui_host, port=settings.ui_port, threads=8,
                   ident="convmon")
