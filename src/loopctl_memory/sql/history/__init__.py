"""The history table: each write's events recorded in its transaction, and read back."""
