"""What each run column means, as the results database's registry describes it: the help a
report shows beside a column comes from where the column is defined."""

from __future__ import annotations

from pgbenchlab.store.columns import COLUMN


def column_doc(name: str) -> str:
    """The registry's one-line description of a run column."""
    return COLUMN[name].doc
