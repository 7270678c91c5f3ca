"""Where a list paged by key stands, shared by the screens that page (sessions, candidates)."""

from __future__ import annotations

from dataclasses import dataclass

Key = tuple[object, ...]


@dataclass
class KeyPaging:
    """The next page's key, and which fetched pages may still be shown.

    Pages are fetched by workers, and what to fetch is fixed when asked: a new filter or sort
    starts a new generation, so a page fetched for an older one is dropped when it arrives,
    and only one next page is asked for at a time (a second ``m`` cannot append it twice).
    """

    generation: int = 0
    next_after: Key | None = None
    loading_more: bool = False

    def restart(self) -> int:
        """A new filter or sort: forget the key; every page in flight is now stale."""
        self.generation += 1
        self.next_after = None
        self.loading_more = False
        return self.generation

    def next_page(self) -> tuple[Key, int] | None:
        """Key and generation of the next page to fetch; None when there is none or it is asked."""
        if self.next_after is None or self.loading_more:
            return None
        self.loading_more = True
        return self.next_after, self.generation

    def arrived(self, generation: int, next_after: Key | None) -> bool:
        """Record a fetched page; False when it is stale and must not be shown."""
        if generation != self.generation:
            return False
        self.loading_more = False
        self.next_after = next_after
        return True
