"""The category check as a chain of comparisons instead of an IN list.

SQLite codes an IN list of more than two constants as a temporary table, which
a CHECK constraint builds again for every row it checks: a third of the cost
of copying an imported batch into ``entries``. Comparisons allow exactly the
same values. SQLite cannot alter a constraint, so there the table is rebuilt;
PostgreSQL swaps the constraint.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As of this revision: later ones must not change what it did.
_CATEGORIES = ("trajectory", "insight", "error_pattern", "strategy", "fact", "working")
_AS_COMPARISONS = " OR ".join(f"category = '{category}'" for category in _CATEGORIES)
_AS_IN_LIST = f"category IN ({', '.join(repr(category) for category in _CATEGORIES)})"


def upgrade() -> None:
    """Check the category with comparisons."""
    _replace_category_check(_AS_COMPARISONS)


def downgrade() -> None:
    """Check the category with an IN list, as 0001 did."""
    _replace_category_check(_AS_IN_LIST)


def _replace_category_check(condition: str) -> None:
    # Expression (DESC) indexes stay outside batch mode, which cannot copy them.
    op.drop_index("ix_entries_relevance_seq", table_name="entries")
    with op.batch_alter_table("entries") as batch:
        batch.drop_constraint(op.f("ck_entries_category"), type_="check")
        batch.create_check_constraint(op.f("ck_entries_category"), sa.text(condition))
    op.create_index(
        "ix_entries_relevance_seq", "entries", [sa.literal_column("relevance DESC"), "seq"]
    )
