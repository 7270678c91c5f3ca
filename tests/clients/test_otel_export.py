"""``scopelens export otel``: spans that opentelemetry-proto reads back, each mapped to its record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from scopelens.core.cli import main
from scopelens.core.clients.otel_export import protobuf_json
from scopelens.core.record.recorder import record_scripts
from scopelens.core.store.store import Store
from scopelens.core.vocab import EventType

SAMPLES = Path(__file__).resolve().parents[2] / "sample_sessions"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    base = tmp_path_factory.mktemp("otel")
    db = str(base / "store.db")
    (base / "work").mkdir()
    record_scripts([SAMPLES / "billing-cents-time"], db=db, workdir=base / "work")
    with Store.open(db, read_only=True) as store:
        sessions = [s.header.id for s in store.list_sessions()]
    return db, sessions


def exported(db: str, sessions: list[str], out: Path, *extra: str) -> list[str]:
    argv = ["export", "otel", "--db", db, "--out", str(out), *extra]
    for session in sessions:
        argv += ["--session", session]
    assert main(argv) == 0
    return out.read_text(encoding="utf-8").splitlines()


def test_every_span_parses_and_maps_back_to_its_snapshot_or_event(recorded, tmp_path: Path) -> None:
    db, sessions = recorded
    lines = exported(db, sessions, tmp_path / "spans.jsonl")
    assert len(lines) == len(sessions)
    with Store.open(db, read_only=True) as store:
        for session_id, line in zip(sessions, lines, strict=True):
            request = json_format.ParseDict(protobuf_json(json.loads(line)), ExportTraceServiceRequest())
            spans = [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]
            events = {e.seq: e for e in store.events(session_id)}
            snapshots = {s.snapshot.id: s for s in store.snapshots_of(session_id)}
            assert len({span.trace_id for span in spans}) == 1
            root = next(span for span in spans if not span.parent_span_id)
            retrievals = []
            for span in spans:
                attributes = {a.key: a.value for a in span.attributes}
                operation = attributes["gen_ai.operation.name"].string_value
                assert attributes["gen_ai.conversation.id"].string_value == session_id
                if span is root:
                    assert operation == "invoke_agent"
                    continue
                assert span.parent_span_id == root.span_id
                if operation == "retrieval":
                    stored = snapshots[attributes["scopelens.snapshot.id"].string_value]
                    assert span.name == f"retrieval {attributes['gen_ai.data_source.id'].string_value}"
                    assert attributes["scopelens.snapshot.hash"].string_value == stored.content_hash
                    documents = json.loads(attributes["gen_ai.retrieval.documents"].string_value)
                    assert [d["id"] for d in documents] == [i.source_ref for i in stored.snapshot.selected]
                    assert all(isinstance(d["score"], float) for d in documents)
                    assert "gen_ai.retrieval.query.text" not in attributes  # only with --include-content
                    retrievals.append(stored.snapshot.id)
                else:
                    event = events[attributes["scopelens.event.seq"].int_value]
                    expected = {"execute_tool": EventType.TOOL_STARTED, "chat": EventType.MODEL_REQUEST}[operation]
                    assert event.type == expected
            assert sorted(retrievals) == sorted(snapshots)  # one retrieval span per snapshot
            tool_calls = sum(e.type == EventType.TOOL_STARTED for e in events.values())
            assert sum(s.name.startswith("execute_tool ") for s in spans) == tool_calls > 0


def test_exporting_twice_gives_the_same_file_and_content_only_on_request(recorded, tmp_path: Path) -> None:
    db, sessions = recorded
    first = exported(db, sessions, tmp_path / "a.jsonl")
    assert exported(db, sessions, tmp_path / "b.jsonl") == first
    with_content = exported(db, sessions, tmp_path / "c.jsonl", "--include-content")
    assert "gen_ai.retrieval.query.text" in with_content[0] and "gen_ai.retrieval.query.text" not in first[0]


def test_an_unknown_session_is_one_line_and_no_file(recorded, tmp_path: Path, capsys) -> None:
    db, _ = recorded
    out = tmp_path / "none.jsonl"
    assert main(["export", "otel", "--db", db, "--session", "s-nope", "--out", str(out)]) != 0
    assert "s-nope" in capsys.readouterr().err and not out.exists()


def test_the_endpoint_receives_protobuf_requests_that_parse(recorded, tmp_path: Path) -> None:
    """``--endpoint`` posts OTLP/HTTP protobuf to ``…/v1/traces``: a local receiver parses it."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    received: list[tuple[str, str, bytes]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Content-Type"], body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        db, sessions = recorded
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        lines = exported(db, sessions, tmp_path / "sent.jsonl", "--endpoint", endpoint)
    finally:
        server.shutdown()
    assert [(path, kind) for path, kind, _ in received] == [("/v1/traces", "application/x-protobuf")] * len(sessions)
    for (_, _, body), line in zip(received, lines, strict=True):
        message = ExportTraceServiceRequest.FromString(body)
        assert message == json_format.ParseDict(protobuf_json(json.loads(line)), ExportTraceServiceRequest())


def test_an_unreachable_endpoint_is_one_line(recorded, tmp_path: Path, capsys) -> None:
    db, sessions = recorded
    code = main(["export", "otel", "--db", db, "--session", sessions[0], "--endpoint", "http://127.0.0.1:9",
                 "--out", str(tmp_path / "x.jsonl")])
    assert code != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --endpoint http://127.0.0.1:9/v1/traces") and "\n" not in err
