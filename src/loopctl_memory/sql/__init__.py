"""The SQL repository: tables, engine, queries, and the store built on them."""
