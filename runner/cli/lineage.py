"""How a stopped run goes on, as ``show`` prints it: the ``runner resume`` command to paste.

The links and commands themselves are ``runner._view.lineage``'s, shared with the console.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from rich.text import Text

from .._log.records import StoredRun
from .._log.statuses import Status
from .._text import clean, shown_name
from .._view.continuation import going_on, pooled, recorded_mcp, recorded_tools, resume_command
from .._view.lineage import pending_approvals
from .._view.timeline import ChildEntry


def continue_hint(run: StoredRun, short: str, db_hint: str = "", *, root: StoredRun | None = None,
                  root_short: str = "", below: Sequence[ChildEntry] = ()) -> Iterator[Text]:
    """How ``runner resume`` goes on with a run awaiting approval, whose process died, or a pool run over a limit.

    ``root``: the run whose resume drives ``run``'s sub-agent tree (``root_short`` its id as printed), whose tools
    the commands name; ``below``: the children under ``run`` waiting for decisions, whose calls it lists.
    """
    root = root if root is not None else run
    pending = pending_approvals(run)
    # A pool run's decisions go back to its workers, who have its tools: --tools only resumes here.
    here = not (pooled(root) and run.status == Status.AWAITING_APPROVAL)
    tools, mcp = (recorded_tools(root), recorded_mcp(root)) if here else (None, [])
    tree = f"   # resumes its tree from run {root_short}" if root.run_id != run.run_id else ""
    if pending:
        asked = ", ".join(f"{shown_name(call_id)} ({shown_name(call.name)})" for call_id, call in pending.items())
        yield Text(f"\nawaiting approval: {asked}", style="bold yellow")
        yield Text("  " + clean(resume_command(short, tools, list(pending), db_hint, mcp)) + tree)
        yield Text("  (--deny CALL_ID [--reason TEXT] refuses a call instead)", style="dim")
    elif below:  # it waits on its sub-agents' child runs, whose calls wait for decisions
        asked = ", ".join(f"{shown_name(call.call_id)} ({shown_name(call.name)}) of run {shown_name(child.short)}"
                          for child in below for call in child.pending)
        yield Text(f"\nawaiting approval in its sub-agents: {asked}", style="bold yellow")
        for child in below:
            command = resume_command(child.short, tools, [call.call_id for call in child.pending], db_hint, mcp)
            yield Text("  " + clean(command) + f"   # resumes the tree from run {root_short or short}")
        yield Text("  (--deny CALL_ID [--reason TEXT] refuses a call instead)", style="dim")
    elif run.status == Status.AWAITING_APPROVAL:  # every call it waits on is decided in the log
        yield Text("  " + clean(resume_command(short, tools, (), db_hint, mcp)) + "   # goes on with the logged "
                   "decisions", style="dim")
    elif pooled(run) and (larger := going_on(run)):  # its workers have its tools
        yield Text("  " + clean(resume_command(short, None) + larger + db_hint) + "   # sends it back to its pool "
                   "with a larger budget", style="dim")
    elif run.gone:
        yield Text("  " + clean(resume_command(short, tools, (), db_hint, mcp)) + "   # continues it", style="dim")
