"""Bisect: the commit that changed performance, found by building and measuring commits of a
git history (`plans`: the bisection's plan and its steps' plans; `rounds`: a step's measurements and
judgements; `search`: the bisection run, step by step, saved after each).

It stands above the campaign (each step is a campaign) and below the reports; it may import the
campaign, the store, the builds, the plan and the analysis.
"""

from pgbenchlab.bisect.search import Bisection, BisectRequest

__all__ = ["BisectRequest", "Bisection"]
