"""The names the command line is known by: its program name and its environment variables.

Outside ``cli/`` so that what prints them (the demo, the rendering) does not load click.
"""

PROG = "loopctl-memory"
DB_ENVVAR = "LOOPCTL_MEMORY_DB"
"""The environment variable naming the database when ``--db`` is not given."""
SCOPE_ENVVAR = "LOOPCTL_MEMORY_SCOPE"
"""The environment variable naming the scope when ``--scope`` is not given."""
RANKING_ENVVAR = "LOOPCTL_MEMORY_RANKING"
"""The environment variable naming the default ranking when ``--ranking`` is not given."""
EMBEDDER_ENVVAR = "LOOPCTL_MEMORY_EMBEDDER"
"""The environment variable naming the embedder's spec when ``--embedder`` is not given."""
BUSY_TIMEOUT_ENVVAR = "LOOPCTL_MEMORY_BUSY_TIMEOUT"
"""The environment variable giving the seconds to wait for a lock when ``--busy-timeout`` is not."""
NO_EMBEDDER = "none"
"""The ``--embedder`` that opens a store without its embedder (writes leave entries pending)."""
