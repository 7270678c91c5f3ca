"""Types of ``_compiled.c`` (the indexer's term counting and postings packing, in C)."""

from collections.abc import Callable, Sequence
from typing import Any

def count_terms(
    units: Sequence[Sequence[str]],
    words_of: Callable[[str], list[str]],
    expand: Callable[[str], tuple[str, ...]],
    /,
) -> tuple[list[str], bytearray, bytearray, bytearray, bytearray]: ...
def pack_postings(
    documents: Sequence[tuple[list[str], object, object, object]], /
) -> tuple[list[str], bytearray, bytearray, list[int]]: ...
def posting_values(
    segment_id: int, terms: list[str], offsets: bytearray, tfs: bytearray, bounds: list[int], lo: int, hi: int, /
) -> list[Any]: ...
