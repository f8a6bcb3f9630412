"""How a stopped run goes on, as ``show`` prints it: the ``runner resume`` command to paste.

The links and commands themselves are ``runner._view.lineage``'s, shared with the console.
"""

from __future__ import annotations

from collections.abc import Iterator

from rich.text import Text

from .._log.records import StoredRun
from .._log.statuses import Status
from .._text import clean, shown_name
from .._view.continuation import going_on, pooled, recorded_mcp, recorded_tools, resume_command
from .._view.lineage import pending_approvals


def continue_hint(run: StoredRun, short: str, db_hint: str = "") -> Iterator[Text]:
    """How ``runner resume`` goes on with a run awaiting approval, whose process died, or a pool run over a limit."""
    pending = pending_approvals(run)
    # A pool run's decisions go back to its workers, who have its tools: --tools only resumes here.
    here = not (pooled(run) and run.status == Status.AWAITING_APPROVAL)
    tools, mcp = (recorded_tools(run), recorded_mcp(run)) if here else (None, [])
    if pending:
        asked = ", ".join(f"{shown_name(call_id)} ({shown_name(call.name)})" for call_id, call in pending.items())
        yield Text(f"\nawaiting approval: {asked}", style="bold yellow")
        yield Text("  " + clean(resume_command(short, tools, list(pending), db_hint, mcp)))
        yield Text("  (--deny CALL_ID [--reason TEXT] refuses a call instead)", style="dim")
    elif run.status == Status.AWAITING_APPROVAL:  # every call it waits on is decided in the log
        yield Text("  " + clean(resume_command(short, tools, (), db_hint, mcp)) + "   # goes on with the logged "
                   "decisions", style="dim")
    elif pooled(run) and (larger := going_on(run)):  # its workers have its tools
        yield Text("  " + clean(resume_command(short, None) + larger + db_hint) + "   # sends it back to its pool "
                   "with a larger budget", style="dim")
    elif run.gone:
        yield Text("  " + clean(resume_command(short, tools, (), db_hint, mcp)) + "   # continues it", style="dim")
