"""The names the command line is known by: its program name and its environment variables."""

PROG = "loopctl-memory"
DB_ENVVAR = "LOOPCTL_MEMORY_DB"
"""The environment variable naming the database when ``--db`` is not given."""
SCOPE_ENVVAR = "LOOPCTL_MEMORY_SCOPE"
"""The environment variable naming the scope when ``--scope`` is not given."""
RANKING_ENVVAR = "LOOPCTL_MEMORY_RANKING"
"""The environment variable naming the default ranking when ``--ranking`` is not given."""
