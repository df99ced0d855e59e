"""The token index: what a write adds to it, and what a query reads of it."""
