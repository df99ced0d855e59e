"""The exception tree: every error this library raises derives from LoopMemoryError."""


class LoopMemoryError(Exception):
    """Root of every error raised by loopctl-memory."""


class InvalidEntryError(LoopMemoryError, ValueError):
    """Bad input: an entry, query or limit that the contract does not accept.

    Nothing is changed when it is raised.
    """


class DuplicateEntryError(InvalidEntryError):
    """An entry with this id is already stored (or appears twice in one batch)."""


class SchemaError(LoopMemoryError):
    """The database schema is not the one this version expects (or is not ours)."""


class StorageError(LoopMemoryError):
    """The database refused an operation: locked, corrupt, full, unreachable or closed.

    The driver's exception is chained as ``__cause__``.
    """
