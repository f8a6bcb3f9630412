"""Cost on the command line: ``--max-cost-usd`` and ``--prices FILE``, and a run's cost as the tables print it.

A budget that cannot be counted (no price for the model) is a usage error, said before
anything is logged; the library refuses it too (``PriceUnknown``), which the CLI also
turns into exit 2.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import TypeVar

import click

from .._log.records import StoredRun
from .._run.identity import model_identity
from .._view.summary import money
from ..events import ModelCalled
from ..prices import Price, PriceBook, load_prices
from .options import CliUsageError

R = TypeVar("R")
BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")  # a TOML key that needs no quotes
PRICES_FILE = "runner.prices_file"  # where ``--prices`` leaves its path in the click context's meta


def finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not an amount of USD", ctx, param)
    return value


def max_cost_option(help_text: str) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """``--max-cost-usd USD``: the run stops ``cost_limit`` once its model calls cost that much."""
    return click.option("--max-cost-usd", "max_cost_usd", type=click.FloatRange(min=0, min_open=True),
                        callback=finite, metavar="USD", help=help_text)


def read_prices(ctx: click.Context, param: click.Parameter, value: str | None) -> dict[str, Price] | None:
    """The prices in ``--prices FILE``; a file that is unreadable or wrong is a usage error."""
    if value is None:
        return None
    ctx.meta[PRICES_FILE] = value  # named again in the resume a cost_limit suggests
    try:
        return load_prices(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


PRICES = click.option("--prices", "prices", metavar="FILE", callback=read_prices,
                      help="Prices to add or override, a TOML or JSON file: a table per model name with input_mtok "
                           "and output_mtok (USD per million tokens). Else genai-prices' table.")


def prices_file() -> str | None:
    """The ``--prices FILE`` of the command running, if it was given one."""
    ctx = click.get_current_context(silent=True)
    found = ctx.meta.get(PRICES_FILE) if ctx is not None else None
    return found if isinstance(found, str) else None


def check_priced(model: object, prices: Mapping[str, Price] | None, budget: float | None, given: bool) -> None:
    """A usage error for a budget on a model with no known price, before anything is set up or logged.

    ``given``: the budget is ``--max-cost-usd``'s, not the one the stored run recorded.
    """
    if budget is None:
        return
    name, provider = model_identity(model)
    if PriceBook(prices).knows(provider, name):
        return
    which = f"--max-cost-usd {budget:g}" if given else f"the run's max_cost_usd={budget:g}"
    key = name if BARE_KEY.fullmatch(name) else '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise CliUsageError(f"no price for model {name!r}" + (f" ({provider})" if provider else "")
                        + f", so {which} cannot be counted: give its price with --prices FILE "
                          f"([{key}] input_mtok = ..., output_mtok = ..., USD per million tokens)")


def run_cost(run: StoredRun) -> str | None:
    """What ``run`` cost, as ``money`` says it; None when none of its model calls was priced."""
    if not any(isinstance(fact, ModelCalled) and fact.cost_usd is not None for fact in run.facts):
        return None
    return money(run.cost_known_usd, run.costs_unknown)
