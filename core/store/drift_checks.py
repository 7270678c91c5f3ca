"""The hashes of drift confirmations: a re-run that found what a recorded drift run found.

A drift re-run whose result is the last recorded run's for its snapshot writes no new run
(``drift_runs``); it appends a confirmation to ``drift_checks`` (which run, when it was
checked). Both hashes here are part of the hash contract (``docs/integrity.md``): ``verify``
re-derives a confirmation's hash from its columns and from the body of the run it confirms,
so a confirmation cannot be moved to another run, time or snapshot, nor outlive a change to
what its run says.
"""

from __future__ import annotations

import json

from scopelens.core.hashing import document_hash

RESULT_EXCLUDES: tuple[str, ...] = ("id", "created_at", "config_hash")
"""The fields of a drift report that say which run it is, not what it found (the configuration
is part of the result hash on its own, so runs recorded before reports held it compare alike)."""


def drift_result_hash(report_body: bytes, config_hash: str) -> str:
    """The hash of what a drift run found: its report (canonical JSON, as stored) without the
    report's own ``id`` and ``created_at``, and the engine configuration it ran under.

    Two runs of one snapshot with the same result hash classified every item alike, against the
    same index version and engine, under the same configuration. Raises ``ValueError`` when the
    body is not a JSON object.
    """
    document = json.loads(report_body)
    if not isinstance(document, dict):
        raise ValueError("a drift report body is a JSON object")
    result = {key: value for key, value in document.items() if key not in RESULT_EXCLUDES}
    return document_hash({"config_hash": config_hash, "report": result})


def drift_check_hash(*, check_id: str, run_id: str, snapshot_id: str, checked_at: str, result_hash: str) -> str:
    """The hash of a confirmation: its columns and the result hash of the run it confirms."""
    return document_hash(
        {
            "id": check_id,
            "run_id": run_id,
            "snapshot_id": snapshot_id,
            "checked_at": checked_at,
            "result_hash": result_hash,
        }
    )
