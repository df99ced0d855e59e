"""``python -m loopctl_memory``: the command line."""

from loopctl_memory.cli import main

main()
