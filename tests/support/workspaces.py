"""Build small workspaces and stores for pipeline tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from scopelens.core.clock import SequentialIds, SteppingClock
from scopelens.core.contracts import MemoryRecord
from scopelens.core.index.indexer import index_workspace
from scopelens.core.index.sources import SourceClassifier
from scopelens.core.memory import seed_memories
from scopelens.core.pipeline.policy import Policy
from scopelens.core.pipeline.retriever import Retriever
from scopelens.core.store.store import Store

T0 = datetime(2026, 2, 2, 9, 0, tzinfo=UTC)

AUTH_FILES = {
    "src/auth/session.ts": (
        "export interface User { name: string; role?: string }\n\n"
        "export function createUserMock(overrides: Partial<User> = {}): User {\n"
        '  return { name: "test-user", ...overrides };\n}\n'
    ),
    "tests/auth/session.test.ts": (
        'import { createUserMock } from "../../src/auth/session";\n\n'
        'test("admin mock has admin role", () => {\n  const user = createUserMock();\n'
        '  expect(user.role).toBe("admin");\n});\n'
    ),
    "docs/rules/mocks.md": "# Test mocks\n\nMocks declare role explicitly. Never rely on a production default for a mock role.\n",
    "docs/admin-roles.md": (
        "# Admin roles\n\nThe admin role grants every permission. Admin users manage the role of other users.\n"
        "Roles: admin, editor, viewer. A role is undefined until assigned. Admin admin role role.\n"
    ),
}


def write(root: Path, files: dict[str, str]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")


class Lab:
    """A store, a clock and workspaces: index, remember, retrieve."""

    def __init__(self, tmp: Path, url: str | None = None) -> None:
        self.tmp = tmp
        self.clock = SteppingClock(T0, timedelta(minutes=1))
        self.ids = SequentialIds("lab")
        self.store = Store.open(url or str(tmp / "lab.db"), create=True, clock=self.clock, ids=self.ids)

    def workspace(self, name: str, files: dict[str, str]) -> Path:
        root = self.tmp / name
        write(root, files)
        return root

    def index(
        self, root: Path, project: str, branch: str | None = None, classifier: SourceClassifier | None = None
    ) -> None:
        index_workspace(self.store, root, project=project, branch=branch, classifier=classifier, clock=self.clock)

    def remember(self, *records: MemoryRecord) -> None:
        """Memories as a test's world holds them, statuses included (not a user's import)."""
        seed_memories(self.store, records)

    def retriever(self, policy: Policy | None = None, root: Path | None = None) -> Retriever:
        return Retriever(self.store, policy=policy, workspace_root=root, clock=self.clock, ids=self.ids)

    def close(self) -> None:
        self.store.close()
