"""Read a context block back by its grammar, as a model would have to: the intro line, then
per item a header, an opening fence, the body and a closing fence, then the closing line.
Anything that does not fit fails the test that reads it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from scopelens.core.pipeline.project import CITATION_LIKE

_HEADER = re.compile(
    r"^\[(?P<cid>[a-z\-]+#\d+)\] (?P<where>.*) · (?P<kind>[a-z\-]+) · authority (?P<authority>[a-z\-]+)"
    r" · trust (?P<trust>instruction|evidence|untrusted-observation)(?: · (?P<label>.*))?$"
)


@dataclass(frozen=True)
class ReadItem:
    citation_id: str
    trust: str
    header: str
    body: str


def read_block(block: str, *, snapshot_id: str, nonce: str, fence: str, intro: str, closing: str) -> list[ReadItem]:
    """The items of ``block``; raises AssertionError where it leaves its grammar.

    ``fence`` is the opening fence's word (``evidence`` or ``observed``), ``intro`` how the
    first line starts, ``closing`` the block's last line."""
    lines = block.split("\n")
    assert lines[0].startswith(f"{intro} (snapshot {snapshot_id}")
    assert lines[-2:] == [closing, ""], lines[-3:]
    items: list[ReadItem] = []
    at = 1
    while at < len(lines) - 2:
        line = lines[at]
        if line == "" or line.startswith(("Missing evidence: no ", "No evidence was found", "Nothing new since",
                                          "A compaction replaced")):
            at += 1
            continue
        header = _HEADER.match(line)
        assert header is not None, f"line {at} is neither a header nor a known line: {line!r}"
        cid = header["cid"]
        assert lines[at + 1] == f"<<<{fence} {nonce} {cid}>>>", lines[at + 1]
        end = lines.index(f"<<<end {nonce} {cid}>>>", at + 2)
        body = "\n".join(lines[at + 2 : end])
        assert nonce not in body, "the nonce inside evidence"
        assert "<<<" not in body and ">>>" not in body, "an unescaped fence marker inside evidence"
        assert CITATION_LIKE.search(body) is None, "an unescaped citation id inside evidence"
        assert nonce not in line and "<<<" not in line and ">>>" not in line
        items.append(ReadItem(cid, header["trust"], line, body))
        at = end + 1
    return items
