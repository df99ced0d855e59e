"""Upkeep in child processes: indexing the tail and building vector graphs, so no call waits."""
