"""Drop the counters of the term tables: nothing read them, and keeping them cost every write.

``tokens``, ``tag_values`` and ``words`` each counted, per term, the entries
indexed with it. No query ever read the count, yet keeping it meant rewriting
every known term's row at each indexing; without it, a writer that already
knows a term's id does not touch the term's row at all. The ids and the
postings are unchanged.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TERM_TABLES = ("tokens", "tag_values", "words")


def upgrade() -> None:
    """Drop each term table's ``entries`` column."""
    for table in _TERM_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("entries")


def downgrade() -> None:
    """Add the counters back, at 0: an older version adds to them and reads them nowhere."""
    for table in _TERM_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column(
                    "entries",
                    sa.BigInteger(),
                    nullable=False,
                    server_default="0",
                    comment="entries indexed with it, at most",
                )
            )
