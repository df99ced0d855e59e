"""The SQL store: its public operations, each part of them a concept of its own."""
