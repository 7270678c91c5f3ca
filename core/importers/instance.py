"""A SWE-bench instance (one JSON object, or a list holding one): the files its gold patch
changes and the tests it must make pass, to mark them when asking what an agent saw."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from scopelens.core.errors import InvalidInputError, UnreadableFileError
from scopelens.core.importers.observations import json_object, read_text_file, string

_DIFF_HEADER = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.M)


@dataclass(frozen=True)
class Instance:
    instance_id: str
    repo: str
    base_commit: str
    gold_files: tuple[str, ...]
    """The files the gold patch changes (its ``b/`` paths), in patch order."""
    fail_to_pass: tuple[str, ...]


def read_instance(path: Path) -> Instance:
    """The instance in ``path``; one line naming the file when it is not one."""
    try:
        document = json.loads(read_text_file(path))
    except json.JSONDecodeError as exc:
        raise UnreadableFileError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if isinstance(document, list) and len(document) == 1:
        document = document[0]
    data = json_object(document)
    patch = string(data.get("patch"))
    if not string(data.get("instance_id")) or not patch:
        raise InvalidInputError(f"{path}: not a SWE-bench instance (an object with instance_id and patch)")
    tests = data.get("FAIL_TO_PASS")
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except json.JSONDecodeError:
            tests = [tests]
    return Instance(
        instance_id=string(data.get("instance_id")),
        repo=string(data.get("repo")),
        base_commit=string(data.get("base_commit")),
        gold_files=tuple(dict.fromkeys(b for _a, b in _DIFF_HEADER.findall(patch))),
        fail_to_pass=tuple(str(t) for t in tests) if isinstance(tests, list) else (),
    )
