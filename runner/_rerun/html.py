"""A rerun's report as HTML: one renderer for ``runner rerun --html``'s page and the console's ``/reruns/{id}``.

``fragment`` is the report itself, a ``<div class="rerun-report">`` (the summary, then each case's runs
side by side); ``render`` wraps it in a self-contained page, its styles inline, no script, and a
``Content-Security-Policy`` that forbids loading anything. The console wraps it in its own layout and
serves ``STYLE`` as a stylesheet. Every text a model, a tool or a task holds is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from typing import Final

from .._text import plural
from .._view.summary import money
from .diff import RunFigures
from .report import Case, RerunReport

STYLE: Final = """
.rerun-report h1 { font-size: 1.4em; } .rerun-report h2 { font-size: 1.1em; margin: 0 0 .4em; }
.rerun-report section { border: 1px solid #ccc; border-radius: 6px; padding: .8em 1em; margin: 1em 0;
                        background: #fff; }
.rerun-report section.regressed { border-color: #c62828; } .rerun-report section.changed { border-color: #ef8f00; }
.rerun-report .verdict { font-weight: bold; } .rerun-report .regressed .verdict { color: #c62828; }
.rerun-report .changed .verdict { color: #b26a00; } .rerun-report .unchanged .verdict { color: #2e7d32; }
.rerun-report table { border-collapse: collapse; width: 100%; }
.rerun-report th, .rerun-report td { text-align: left; vertical-align: top; padding: .3em .5em; }
.rerun-report th { white-space: nowrap; color: #555; font-weight: normal; }
.rerun-report tr + tr { border-top: 1px solid #eee; }
.rerun-report td.differs { background: #fff4e0; }
.rerun-report pre { margin: 0; padding: 0; border: 0; background: none; max-height: none; white-space: pre-wrap;
                    word-break: break-word; }
.rerun-report .add { color: #1b5e20; background: #e8f5e9; } .rerun-report .del { color: #b71c1c; background: #ffebee; }
.rerun-report .dim { color: #777; } .rerun-report code { font-size: .95em; }
"""
PAGE_STYLE: Final = ("body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 80em; padding: 0 1em;"
                     " color: #222; }")
NONE: Final = '<span class="dim">-</span>'
CSP: Final = "default-src 'none'; style-src 'unsafe-inline'"
Link = Callable[[str], str]
"""A run's address from its id, for a page where runs open (the console's); None: ids as text."""


def e(value: object) -> str:
    """``value`` as HTML text: escaped, quotes included."""
    return html.escape(str(value), quote=True)


def render(report: RerunReport) -> str:
    """The whole self-contained page for ``report`` (``runner rerun --html``)."""
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<title>rerun {e(report.rerun_id)}</title><style>{PAGE_STYLE}{STYLE}</style></head><body>\n"
            f"{fragment(report)}</body></html>\n")


def fragment(report: RerunReport, link: Link | None = None) -> str:
    """The report, one ``<div class="rerun-report">``; run ids link to ``link(run_id)`` when given."""
    return "".join(_report(report, link or _no_link))


def _no_link(run_id: str) -> str:
    return ""


def _run(run_id: str, link: Link) -> str:
    """A run's id, in ``<code>``, linked where runs open."""
    href = link(run_id)
    return f'<a href="{e(href)}"><code>{e(run_id)}</code></a>' if href else f"<code>{e(run_id)}</code>"


def _report(report: RerunReport, link: Link) -> Iterator[str]:
    model = report.model + (f" ({report.provider})" if report.provider else "")
    yield '<div class="rerun-report">\n'
    yield f"<h1>rerun <code>{e(report.rerun_id)}</code> on {e(model)}</h1>\n"
    yield f'<p class="summary">{e(report.summary())}</p>\n'
    yield (f'<p class="dim">{plural(report.samples, "sample")} per case; the candidates are labelled '
           f"<code>rerun={e(report.rerun_id)}</code>.</p>\n")
    if report.interrupted:
        yield f'<p class="verdict">interrupted: {plural(len(report.left), "case")} did not finish</p>\n'
    elif report.left:  # read from the store while its candidates run
        yield f'<p class="verdict running">running: {plural(len(report.left), "case")} not finished yet</p>\n'
    for case in report.cases:
        yield from _case(case, link)
    yield "</div>\n"


ROWS: Final[tuple[tuple[str, str, Callable[[RunFigures], str]], ...]] = (
    ("status", "status", lambda r: e(r.status) + (f'<div class="dim">{e(r.error)}</div>' if r.error else "")),
    ("answer", "answer", lambda r: f"<pre>{e(r.answer)}</pre>" if r.answer is not None else NONE),
    ("steps", "steps", lambda r: e(r.steps)),
    ("tokens", "tokens", lambda r: f"{r.tokens:,}"),
    ("cost", "", lambda r: e(money(r.cost_known_usd, r.cost_usd is None))),
    ("duration", "", lambda r: f"{r.duration_s:.2f} s" if r.duration_s is not None else "-"),
)


def _case(case: Case, link: Link) -> Iterator[str]:
    runs = [case.baseline, *case.candidates]
    yield f'<section class="{e(case.verdict)}" id="case-{e(case.baseline.run_id)}">\n'
    yield f'<h2><span class="verdict">{e(case.verdict)}</span> · baseline {_run(case.baseline.run_id, link)}</h2>\n'
    yield f"<p>{e(case.task)}</p>\n"
    if case.changed:
        yield f"<p>changed: {e(', '.join(case.changed))}"
        yield f"; unstable: {e(', '.join(case.unstable))}</p>\n" if case.unstable else "</p>\n"
    heads = "".join(f"<th>sample {n}</th>" for n in range(1, len(case.candidates) + 1))
    yield f"<table><tr><th></th><th>baseline</th>{heads}</tr>\n"
    yield f"<tr><th>run</th>{''.join(_td(_run(run.run_id, link), False) for run in runs)}</tr>\n"
    for label, field, cell in ROWS:
        cells = "".join(_td(cell(run), bool(field) and n > 0 and field in case.changed
                            and cell(run) != cell(case.baseline)) for n, run in enumerate(runs))
        yield f"<tr><th>{label}</th>{cells}</tr>\n"
    calls = _td(_pre([f"  {c.line()}" for c in case.baseline.tool_calls]), False)
    for run, diff in zip(case.candidates, case.diffs(), strict=True):  # a diff where the calls differ
        calls += _td(_pre(diff or [f"  {c.line()}" for c in run.tool_calls]), bool(diff))
    yield f"<tr><th>tool calls</th>{calls}</tr>\n"
    answered = "".join(f"<td>{t.served} served, {t.live} live, {t.not_run} not run</td>" for t in case.tools)
    yield f'<tr><th>tools</th><td class="dim">as recorded</td>{answered}</tr>\n'
    yield "</table></section>\n"


def _td(content: str, differs: bool) -> str:
    return f'<td class="differs">{content}</td>' if differs else f"<td>{content}</td>"


def _pre(lines: list[str]) -> str:
    """Tool-call lines (or diff lines) in a ``<pre>``, added and removed ones marked."""
    if not lines:
        return '<span class="dim">none</span>'
    out = []
    for line in lines:
        kind = {"+": "add", "-": "del"}.get(line[:1])
        out.append(f'<span class="{kind}">{e(line)}</span>' if kind else e(line))
    return "<pre>" + "\n".join(out) + "</pre>"


def write(report: RerunReport, path: str) -> None:
    """Write the page for ``report`` to ``path`` (UTF-8)."""
    with open(path, "w", encoding="utf-8") as out:
        out.write(render(report))

