"""Recording scripted agent sessions through the real engine, deterministically.

A *session script* (``docs/session-scripts.md``) describes one agent session: user messages,
tool runs, file edits, re-indexing, clock steps, retrieval intents and model replies that
cite evidence. :func:`record_script` runs it against a store with an injected clock and id
source, so the same script gives the same hashes, and reports *findings*: the failure forms
of scoped retrieval that the recorded facts show (see ``findings.py``).
"""

from __future__ import annotations

from scopelens.core.record.findings import Finding
from scopelens.core.record.recorder import RecordResult, SnapshotRecord, record_script, record_scripts
from scopelens.core.record.script import LoadedScript, load_script
from scopelens.core.vocab import FindingKind, Outcome

__all__ = [
    "Finding",
    "FindingKind",
    "LoadedScript",
    "Outcome",
    "RecordResult",
    "SnapshotRecord",
    "load_script",
    "record_script",
    "record_scripts",
]
