"""The exception tree: every error this library raises derives from LoopMemoryError."""


class LoopMemoryError(Exception):
    """Root of every error raised by loopctl-memory."""


class InvalidEntryError(LoopMemoryError, ValueError):
    """Bad input: an entry, query or limit that the contract does not accept.

    Nothing is changed when it is raised.
    """


class InvalidArgumentError(InvalidEntryError):
    """Bad input that is not an entry: an option, a rule, a filter, a prefix or a batch size.

    A subclass of :class:`InvalidEntryError` (and so a ``ValueError``), so code
    that caught that before still catches it. Nothing is changed when it is raised.
    """


class DuplicateEntryError(InvalidEntryError):
    """An entry with this id is already stored (or appears twice in one batch)."""


class SchemaError(LoopMemoryError):
    """The database schema is not the one this version expects (or is not ours)."""


class SchemaBehindError(SchemaError):
    """The database has no schema yet, or an older one, and the open was not to migrate it."""

    def __init__(self, message: str, *, revision: str | None, needed: str) -> None:
        super().__init__(message)
        self.revision = revision
        """The database's revision (None: it has no schema yet)."""
        self.needed = needed
        """The revision this version needs."""


class StorageError(LoopMemoryError):
    """The database refused an operation: locked, corrupt, full, unreachable or closed.

    The driver's exception is chained as ``__cause__``.
    """


class DatabaseBusyError(StorageError):
    """Another connection kept the database busy past the busy timeout; nothing was done."""


class StoreClosedError(StorageError):
    """The store was closed: it answers nothing more."""


class ReadOnlyStoreError(StorageError):
    """A write was asked of a store opened with ``read_only=True``; nothing was written."""


class EmbedderError(LoopMemoryError):
    """The embedder failed, answered in the wrong shape, or is not the one the store records.

    A write never raises it: an entry whose vector could not be made is stored
    and left pending (see ``pending_embeddings``). A query ranked by vectors
    does, when its vector cannot be made. The embedder's own exception, if
    any, is chained as ``__cause__``.
    """
