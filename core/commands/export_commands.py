"""``scopelens export otel``: a session as OpenTelemetry spans (GenAI conventions).

The file needs no extra package; ``--endpoint`` (OTLP/HTTP protobuf) needs ``[otel]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from scopelens.core.errors import InvalidInputError


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    export = subparsers.add_parser("export", parents=[common], help="export sessions for other tools")
    formats = export.add_subparsers(dest="export_format", metavar="FORMAT", required=True)
    otel = formats.add_parser("otel", parents=[common],
                              help="a session as OpenTelemetry spans (GenAI conventions): OTLP/JSON or OTLP/HTTP")
    otel.add_argument("--session", action="append", required=True, metavar="S",
                      help="the session to export (repeatable: one line per session)")
    otel.add_argument("--out", type=Path, metavar="FILE", help="write OTLP/JSON lines here (default: stdout)")
    otel.add_argument("--endpoint", metavar="URL",
                      help="also POST to this OTLP/HTTP endpoint (…/v1/traces is added if missing)")
    otel.add_argument("--include-content", action="store_true",
                      help="include query text, tool arguments and results, and model output (redacted as stored)")
    otel.set_defaults(run=run_export_otel)


def run_export_otel(args: argparse.Namespace) -> int:
    from scopelens.core.clients.otel_export import post, session_request, to_line
    from scopelens.core.store.store import Store

    with Store.open(args.db, read_only=True) as store:
        requests = [session_request(store, session, include_content=args.include_content) for session in args.session]
    lines = "".join(to_line(request) + "\n" for request in requests)
    if args.out is not None:
        try:
            args.out.write_text(lines, encoding="utf-8")
        except OSError as exc:
            raise InvalidInputError(f"--out {args.out}: {exc.strerror or exc}") from None
    elif args.endpoint is None:
        sys.stdout.write(lines)
    if args.endpoint is not None:
        sent = post(requests, args.endpoint)
        print(f"sent {sent} span(s) of {len(requests)} session(s) to {args.endpoint}", file=sys.stderr)
    return 0
