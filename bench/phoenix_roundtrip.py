"""Send recorded sessions to a real Arize Phoenix over OTLP/HTTP and read the spans back.

Run ``python -m bench.phoenix_roundtrip --phoenix-venv DIR``, where ``DIR`` is a virtual
environment with ``arize-phoenix`` and ``arize-phoenix-client`` installed (Phoenix is heavy:
keep it out of scopelens's own environment)::

    python3 -m venv /tmp/venv-phoenix && /tmp/venv-phoenix/bin/pip install arize-phoenix arize-phoenix-client

It records two sample sessions into a fresh store, starts ``phoenix serve`` on 127.0.0.1 (its
SQLite default, in a temporary working directory), exports each session with
``scopelens.core.clients.otel_export.post``, reads the spans back through Phoenix's own client
(run by the Phoenix environment's interpreter) and checks that every snapshot arrived as a
``retrieval`` span carrying its documents. Exit 0 only then.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from scopelens.core.clients.otel_export import post, session_request
from scopelens.core.record.recorder import record_scripts
from scopelens.core.store.store import Store

SAMPLES = Path(__file__).resolve().parents[1] / "sample_sessions"
SCENARIOS = ("billing-cents-time", "auth-role-mock")
READ_BACK = """
import json, sys
from phoenix.client import Client
spans = Client(base_url=sys.argv[1]).spans.get_spans(project_identifier="default", limit=10000)
json.dump(spans, sys.stdout, default=str)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def flat(attributes: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Phoenix nests dotted attribute names (``gen_ai.retrieval.documents``) into objects."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if isinstance(value, dict):
            out |= flat(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def print_traces(spans: list[dict[str, Any]]) -> None:
    """Each trace as Phoenix holds it: the spans under their parents, with their kind."""
    context = {span["context"]["span_id"]: span for span in spans if span.get("context")}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for span in spans:
        parent = span.get("parent_id")
        children.setdefault(parent if parent in context else None, []).append(span)

    def show(span: dict[str, Any], depth: int) -> None:
        documents = flat(span.get("attributes") or {}).get("gen_ai.retrieval.documents")
        count = f" ({len(json.loads(documents))} documents)" if documents else ""
        print(f"{'  ' * depth}{span.get('span_kind', '')[:8]:<8} {span.get('name')}{count}")
        for child in sorted(children.get(span["context"]["span_id"], []), key=lambda s: s.get("start_time", "")):
            show(child, depth + 1)

    for root in sorted(children.get(None, []), key=lambda s: s.get("start_time", "")):
        print(f"trace {root['context']['trace_id']}")
        show(root, 1)


def wait_until_up(url: str, process: subprocess.Popen[bytes], seconds: float = 180.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"phoenix exited with code {process.returncode} before it served {url}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"phoenix did not answer at {url} within {seconds:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--phoenix-venv", type=Path, default=Path(os.environ.get("PHOENIX_VENV", "/tmp/venv-phoenix")))
    parser.add_argument("--keep", action="store_true", help="leave Phoenix running (its URL is printed) to look at")
    args = parser.parse_args(argv)
    phoenix = args.phoenix_venv / "bin" / "phoenix"
    python = args.phoenix_venv / "bin" / "python"
    if not phoenix.exists():
        raise SystemExit(f"no Phoenix in {args.phoenix_venv}: see this module's doc for the install command")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "work").mkdir()
        db = str(work / "store.db")
        record_scripts([SAMPLES / name for name in SCENARIOS], db=db, workdir=work / "work")
        with Store.open(db, read_only=True) as store:
            sessions = [s.header.id for s in store.list_sessions()]
            requests = [session_request(store, s, include_content=True) for s in sessions]
            expected = {stored.snapshot.id: [i.source_ref for i in stored.snapshot.selected]
                        for s in sessions for stored in store.snapshots_of(s)}
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        env = dict(os.environ, PHOENIX_WORKING_DIR=str(work / "phoenix"), PHOENIX_HOST="127.0.0.1",
                   PHOENIX_PORT=str(port), PHOENIX_GRPC_PORT=str(free_port()), PHOENIX_TELEMETRY_ENABLED="false")
        log = (work / "phoenix.log").open("wb")
        server = subprocess.Popen([str(phoenix), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            started = time.perf_counter()
            wait_until_up(base, server)
            print(f"phoenix up at {base} after {time.perf_counter() - started:.1f} s")
            sent = post(requests, base)
            print(f"sent {sent} spans of {len(sessions)} sessions ({len(expected)} snapshots) over OTLP/HTTP")
            spans: list[dict[str, Any]] = []
            for _ in range(40):  # Phoenix inserts spans in the background
                read = subprocess.run([str(python), "-c", READ_BACK, base], capture_output=True, text=True, check=True)
                spans = json.loads(read.stdout)
                if len(spans) >= sent:
                    break
                time.sleep(0.5)
            retrievals = {}
            for span in spans:
                attributes = flat(span.get("attributes") or {})
                if span.get("name", "").startswith("retrieval ") and attributes.get("gen_ai.operation.name") == "retrieval":
                    documents = json.loads(attributes.get("gen_ai.retrieval.documents", "[]"))
                    retrievals[attributes.get("scopelens.snapshot.id")] = [d["id"] for d in documents]
            matched = sum(retrievals.get(snapshot) == documents for snapshot, documents in expected.items())
            print(f"read back {len(spans)} spans through phoenix.client; {len(retrievals)} retrieval spans; "
                  f"{matched}/{len(expected)} snapshots arrived as retrieval spans with their documents")
            print_traces(spans)
            if args.keep:
                print(f"Phoenix keeps running at {base} (Ctrl-C to stop)")
                server.wait()
            return 0 if matched == len(expected) and len(spans) == sent else 1
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
            log.close()


if __name__ == "__main__":
    sys.exit(main())
