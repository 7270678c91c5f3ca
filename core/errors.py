"""User-facing errors: one base class, each shown as one clear line at the CLI's edge.

Anything a user can cause (a bad id, a bad file, a foreign database) raises a subclass of
``ScopelensError``. The CLI prints ``error: <message>`` and exits with ``exit_code``; only
``--debug`` shows a traceback. Anything else escaping is a bug.
"""

from __future__ import annotations


class ScopelensError(Exception):
    """Base class of every error a user can cause."""

    exit_code: int = 2


class UnknownIdError(ScopelensError):
    """An id (session, snapshot, event, memory) that the store does not hold."""


class UnreadableFileError(ScopelensError):
    """A file that does not exist, cannot be read, or does not parse."""


class InvalidInputError(ScopelensError):
    """An input document (intent, scope, policy, script) that fails validation."""


class SecretRefusedError(InvalidInputError):
    """A document that still holds a detectable secret, handed to the store unredacted.

    Text is redacted where it enters (the retriever, the CLI's parsers, the recorder, the
    importers); the store refuses what slipped past rather than rewriting it silently.
    """


class NotAScopelensStoreError(ScopelensError):
    """A database that exists but was not made by scopelens, or is corrupted."""


class NewerSchemaError(ScopelensError):
    """A store written by a newer scopelens than this one."""


class StoreUnavailableError(ScopelensError):
    """A store URL that cannot be opened (no server, no permission, bad URL)."""


class StoreNotWritableError(ScopelensError):
    """A store this user or role may read but not write (a read-only file, directory or role)."""


class IndexChangedError(ScopelensError):
    """Index documents prepared against live versions that another run has replaced since."""


class PathEscapeError(ScopelensError):
    """A path that leaves the workspace root, or a symlink the walker refuses."""


class ImmutableRecordError(ScopelensError):
    """An attempt to change or delete an append-only record."""


class IntegrityError(ScopelensError):
    """A store whose hashes or links do not verify, where a clean one is needed."""

    exit_code = 3
