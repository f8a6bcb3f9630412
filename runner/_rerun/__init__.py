"""Rerun: finished runs' work started over on another model or prompt, with a behaviour diff.

``rerun`` (``runner.rerun``) starts each baseline's task again as new, linked runs (candidates),
serves the baseline's recorded observations to identical calls so no side effect is repeated,
and returns a ``RerunReport``: per case, what changed, what is unstable, what regressed.
The package is private (``_rerun``) so that ``runner.rerun`` stays the function. See docs/rerun.md.
"""

from .diff import Call, RunFigures
from .report import Case, RerunReport, Totals
from .session import rerun
from .tools import ToolCounts

__all__ = ["Call", "Case", "RerunReport", "RunFigures", "ToolCounts", "Totals", "rerun"]
