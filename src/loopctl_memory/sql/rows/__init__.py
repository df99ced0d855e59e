"""Entries as rows: every query the store runs over entries, scopes, fields and keys."""
