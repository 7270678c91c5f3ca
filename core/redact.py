"""Redaction as contracts: ``redact(text, key)`` gives the text with each secret replaced by
``[REDACTED:<kind>]`` and one :class:`~scopelens.core.contracts.Redaction` per secret; JSON-like
values and whole documents are redacted string by string. The rules (which formats count as
secrets, and how overlapping matches are resolved) are in ``core/redaction_scan.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from scopelens.core.contracts import Contract, Redaction
from scopelens.core.redaction_scan import (
    ENTROPY_THRESHOLD,
    RedactionKey,
    _detect,
    placeholder,
    redaction_records,
    replacement,
    shannon_entropy,
)
from scopelens.core.vocab import RedactionKind as K

__all__ = [
    "ENTROPY_THRESHOLD", "Redacted", "RedactionKey", "placeholder", "redact", "redact_document", "redact_values",
    "redaction_records", "replacement", "secrets_in", "shannon_entropy",
]


@dataclass(frozen=True)
class Redacted:
    """Redacted text and the redactions made, sorted by start."""

    text: str
    redactions: tuple[Redaction, ...]


def redact(text: str, key: RedactionKey | None = None) -> Redacted:
    """Replace every secret in ``text``; ranges in the result refer to ``text``.

    With ``key``, each record keeps an HMAC of its secret; without, no hash at all (callers
    that keep the records, such as the indexer, always pass the store's key).
    """
    redacted, records = redaction_records(text, key)
    return Redacted(text=redacted, redactions=tuple(Redaction.model_validate(record) for record in records))


def redact_values(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, strings, numbers) with every string redacted.

    For structured records such as tool arguments, where a token can sit at any depth.
    """
    if isinstance(value, str):
        return redact(value).text
    if isinstance(value, dict):
        return {key: redact_values(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_values(item) for item in value]
    return value


ContractT = TypeVar("ContractT", bound=Contract)


def redact_document(document: ContractT) -> ContractT:
    """``document`` with every string field, at any depth, redacted (intake of intents and the
    like: whatever derives from it, a title, a plan's terms, a block, then holds no secret)."""
    dumped = document.model_dump(mode="json")
    redacted = redact_values(dumped)
    return document if redacted == dumped else type(document).model_validate(redacted)


def secrets_in(value: Any, where: str = "") -> list[tuple[str, K]]:
    """``(field path, kind)`` of every detectable secret in a JSON-like ``value``; never the secret.

    The usual answer is none, so every string is first scanned once, joined by blank lines
    (a snapshot holds thousands of short strings: paths, refs, reasons); only when that finds
    something is each string scanned alone, for the field paths. A secret in one string is
    found in the joined text too, and a match that only the joining made is dropped then.
    """
    strings = list(_strings(value, where))
    if not strings or not _detect("\n\n".join(text for _path, text in strings)):
        return []
    return [(path or "text", kind) for path, text in strings for _start, _end, kind in _detect(text)]


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _strings(item, f"{where}[{index}]")
