"""Follow a branch: its commits selected (`selection`), built incrementally and measured, each
a campaign of its own recorded with what the commit is (`run`); the series of every cell and
metric along the commits and their change points (`history`), each change with unmeasured
commits inside its range bisected by `bisect`.

It stands beside `bisect` (whose plans, builds and bisections it reuses) and below the reports,
which read its history from the results database.
"""

from pgbenchlab.follow.run import Follow, FollowOutcome, FollowRequest

__all__ = ["Follow", "FollowOutcome", "FollowRequest"]
