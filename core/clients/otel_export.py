"""A session as OpenTelemetry spans that follow the GenAI semantic conventions.

One ``ExportTraceServiceRequest`` per session, in OTLP/JSON (what the OpenTelemetry file
exporter writes: one request per line, trace and span ids as hex, 64-bit integers as
strings), or posted as protobuf to an OTLP/HTTP endpoint (``opentelemetry-proto``, the
``[otel]`` extra, imported only then).

* a root ``invoke_agent scopelens`` span for the session;
* a ``retrieval {gen_ai.data_source.id}`` span (kind CLIENT) per snapshot, with
  ``gen_ai.retrieval.documents`` as a JSON string of ``[{id, score}]`` (span attributes cannot
  hold arrays of maps), the query text only with ``include_content``, and the audit facts
  under ``scopelens.*``;
* an ``execute_tool {name}`` span per tool call and a ``chat {model}`` span per model call.

Ids are derived from the session, snapshot and event ids and times are the stored ones, so
exporting a session twice gives the same bytes. The GenAI attribute names are written here
once: the semantic-conventions package marks its ``gen_ai`` constants deprecated (the
conventions moved to their own repository).
"""

from __future__ import annotations

import base64
import hashlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from scopelens.core import __version__
from scopelens.core.contracts import AuditSnapshot, Event, SessionHeader
from scopelens.core.errors import InvalidInputError
from scopelens.core.hashing import document_hash
from scopelens.core.store.store import Store
from scopelens.core.vocab import EventType

OPERATION = "gen_ai.operation.name"
DATA_SOURCE = "gen_ai.data_source.id"
CONVERSATION = "gen_ai.conversation.id"
DOCUMENTS = "gen_ai.retrieval.documents"
QUERY_TEXT = "gen_ai.retrieval.query.text"
TOP_K = "gen_ai.request.top_k"
REQUEST_MODEL = "gen_ai.request.model"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
OUTPUT_MESSAGES = "gen_ai.output.messages"
AGENT_NAME = "gen_ai.agent.name"

SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
STATUS_ERROR = 2


def session_request(store: Store, session_id: str, *, include_content: bool = False) -> dict[str, Any]:
    """The session's spans as one ``ExportTraceServiceRequest`` (OTLP/JSON form)."""
    header = store.get_session(session_id)
    events = store.events(session_id)
    snapshots = [(stored.snapshot, stored.content_hash) for stored in store.snapshots_of(session_id)]
    trace = _id(16, "trace", session_id)
    root = _id(8, "session", session_id)
    end = max([header.created_at, *(e.created_at for e in events), *(s.created_at for s, _ in snapshots)])
    spans = [_span(trace, root, None, f"invoke_agent {header.agent or 'scopelens'}", SPAN_KIND_INTERNAL,
                   header.created_at, end, {
                       OPERATION: "invoke_agent", CONVERSATION: session_id, AGENT_NAME: header.agent or "scopelens",
                       "scopelens.session.id": session_id, "scopelens.project": header.project,
                       "scopelens.branch": header.branch or "",
                   })]
    spans += [_retrieval_span(trace, root, header, snapshot, digest, include_content) for snapshot, digest in snapshots]
    spans += _call_spans(trace, root, events, include_content)
    return {"resourceSpans": [{
        "resource": {"attributes": _attributes({"service.name": "scopelens", "service.version": __version__})},
        "scopeSpans": [{"scope": {"name": "scopelens", "version": __version__}, "spans": spans}],
    }]}


def _retrieval_span(trace: str, root: str, header: SessionHeader, snapshot: AuditSnapshot, digest: str,
                    include_content: bool) -> dict[str, Any]:
    source = f"scopelens:{header.project}"
    attributes: dict[str, Any] = {
        OPERATION: "retrieval",
        DATA_SOURCE: source,
        CONVERSATION: header.id,
        DOCUMENTS: json.dumps([{"id": item.source_ref, "score": item.scores.final, "citation_id": item.citation_id}
                               for item in snapshot.selected], ensure_ascii=False),
        "scopelens.snapshot.id": snapshot.id,
        "scopelens.snapshot.hash": digest,
        "scopelens.snapshot.kind": snapshot.kind.value,
        "scopelens.turn": snapshot.turn,
        "scopelens.scope_hash": document_hash(snapshot.scope) if snapshot.scope is not None else "",
        "scopelens.visible_text_hash": snapshot.projection.visible_text_hash,
        "scopelens.rejections": json.dumps([{"source_ref": r.source_ref, "stage": r.stage.value}
                                            for r in snapshot.rejected], ensure_ascii=False),
        "scopelens.trim_ranges": json.dumps([{"citation_id": i.citation_id, "ranges": [r.model_dump() for r in i.trim_ranges]}
                                             for i in snapshot.selected if i.trim_ranges], ensure_ascii=False),
        "scopelens.citations": json.dumps([{"citation_id": c.citation_id, "source_ref": c.source_ref,
                                            "visible_text_hash": c.visible_text_hash}
                                           for c in snapshot.projection.citation_map.values()], ensure_ascii=False),
    }
    if snapshot.scope is not None:
        attributes[TOP_K] = snapshot.scope.budget.max_items
    if include_content and snapshot.intent is not None:
        attributes[QUERY_TEXT] = snapshot.intent.question
    return _span(trace, _id(8, "snapshot", snapshot.id), root, f"retrieval {source}", SPAN_KIND_CLIENT,
                 snapshot.created_at, snapshot.created_at, attributes)


def _call_spans(trace: str, root: str, events: list[Event], include_content: bool) -> list[dict[str, Any]]:
    """``execute_tool`` spans (a tool's start to its finish) and ``chat`` spans (a model
    request to its response); a call never finished ends where it started."""
    finished = {(e.type, _key(e)): e for e in events if e.type in (EventType.TOOL_FINISHED, EventType.MODEL_RESPONSE)}
    spans = []
    for event in events:
        if event.type == EventType.TOOL_STARTED:
            done = finished.get((EventType.TOOL_FINISHED, _key(event)))
            tool = str(event.payload.get("tool", ""))
            attributes: dict[str, Any] = {OPERATION: "execute_tool", TOOL_NAME: tool, TOOL_TYPE: "function",
                                          TOOL_CALL_ID: str(event.payload.get("call_id", "")),
                                          CONVERSATION: event.session_id, "scopelens.event.seq": event.seq,
                                          "scopelens.turn": event.turn}
            if done is not None:
                attributes["scopelens.finished.seq"] = done.seq
                if done.payload.get("exit_code") is not None:
                    attributes["scopelens.exit_code"] = int(done.payload["exit_code"])
            if include_content:
                attributes[TOOL_ARGUMENTS] = json.dumps(event.payload.get("arguments", {}), ensure_ascii=False)
                if done is not None:
                    attributes[TOOL_RESULT] = str(done.payload.get("output_preview", ""))
            failed = done is not None and done.payload.get("exit_code") not in (None, 0)
            spans.append(_span(trace, _id(8, "event", f"{event.session_id}:{event.seq}"), root, f"execute_tool {tool}",
                               SPAN_KIND_INTERNAL, event.created_at, (done or event).created_at, attributes, error=failed))
        elif event.type == EventType.MODEL_REQUEST:
            done = finished.get((EventType.MODEL_RESPONSE, _key(event)))
            model = str(event.payload.get("model", "")) or "model"
            attributes = {OPERATION: "chat", REQUEST_MODEL: model, CONVERSATION: event.session_id,
                          "scopelens.event.seq": event.seq, "scopelens.turn": event.turn,
                          "scopelens.context_hash": str(event.payload.get("context_hash", "")),
                          "scopelens.snapshot_ids": json.dumps(list(event.payload.get("snapshot_ids", ())))}
            if done is not None:
                attributes["scopelens.finished.seq"] = done.seq
                if include_content:
                    attributes[OUTPUT_MESSAGES] = json.dumps([{"role": "assistant", "parts": [
                        {"type": "text", "content": str(done.payload.get("text", ""))}]}], ensure_ascii=False)
            spans.append(_span(trace, _id(8, "event", f"{event.session_id}:{event.seq}"), root, f"chat {model}",
                               SPAN_KIND_CLIENT, event.created_at, (done or event).created_at, attributes))
    return spans


def _key(event: Event) -> str:
    return str(event.payload.get("call_id") or event.payload.get("request_id") or "")


def _span(trace: str, span: str, parent: str | None, name: str, kind: int, start: datetime, end: datetime,
          attributes: dict[str, Any], *, error: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"traceId": trace, "spanId": span}
    if parent is not None:
        out["parentSpanId"] = parent
    out |= {"name": name, "kind": kind, "startTimeUnixNano": str(_nanos(start)),
            "endTimeUnixNano": str(max(_nanos(end), _nanos(start))), "attributes": _attributes(attributes),
            "status": {"code": STATUS_ERROR} if error else {}}
    return out


def _attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, value in values.items():
        if isinstance(value, bool):
            encoded: dict[str, Any] = {"boolValue": value}
        elif isinstance(value, int):
            encoded = {"intValue": str(value)}
        elif isinstance(value, float):
            encoded = {"doubleValue": value}
        else:
            encoded = {"stringValue": str(value)}
        out.append({"key": key, "value": encoded})
    return out


def _id(size: int, kind: str, value: str) -> str:
    return hashlib.sha256(f"scopelens {kind}\0{value}".encode()).digest()[:size].hex()


def _nanos(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


def to_line(request: dict[str, Any]) -> str:
    """The request as one line of OTLP/JSON."""
    return json.dumps(request, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def protobuf_json(request: dict[str, Any]) -> dict[str, Any]:
    """The request in protobuf's canonical JSON mapping (ids base64, not hex), for
    ``json_format.ParseDict``: OTLP/JSON differs from it only there."""
    def convert(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: base64.b64encode(bytes.fromhex(value)).decode() if key in ("traceId", "spanId", "parentSpanId")
                    else convert(value) for key, value in node.items()}
        if isinstance(node, list):
            return [convert(item) for item in node]
        return node
    converted: dict[str, Any] = convert(request)
    return converted


def post(requests: Iterable[dict[str, Any]], endpoint: str, *, timeout: float = 10.0) -> int:
    """POST each request to ``endpoint`` as OTLP/HTTP protobuf; how many spans were sent."""
    try:
        from google.protobuf import json_format  # type: ignore[import-untyped]
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ModuleNotFoundError:
        raise InvalidInputError("--endpoint needs the otel extra: pip install 'scopelens[otel]'") from None
    url = endpoint if endpoint.rstrip("/").endswith("/v1/traces") else endpoint.rstrip("/") + "/v1/traces"
    sent = 0
    for request in requests:
        message = json_format.ParseDict(protobuf_json(request), ExportTraceServiceRequest())
        http = urllib.request.Request(url, data=message.SerializeToString(), method="POST",
                                      headers={"Content-Type": "application/x-protobuf"})
        try:
            with urllib.request.urlopen(http, timeout=timeout) as response:
                response.read()
        except (urllib.error.URLError, OSError) as exc:
            raise InvalidInputError(f"--endpoint {url}: {getattr(exc, 'reason', exc)}") from None
        sent += sum(len(scope["spans"]) for resource in request["resourceSpans"] for scope in resource["scopeSpans"])
    return sent
