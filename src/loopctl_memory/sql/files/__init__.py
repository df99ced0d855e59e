"""What watches and guards a SQLite file a store opened.

Nothing here opens, copies, renames or deletes a database file, its ``-wal``
or its ``-shm`` while SQLite may hold it: one descriptor per file per process
(:mod:`~loopctl_memory.sql.files.held`) serves every check of the file's
header (:mod:`~loopctl_memory.sql.files.header`), and the checks of the
store's file (:mod:`~loopctl_memory.sql.files.watch`) otherwise only ``stat`` it.
"""
