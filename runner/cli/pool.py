"""``runner submit``, ``runner worker`` and ``runner cancel``: the worker pool from a shell.

Thin layers over ``runner.pool``: submit records a ``queued`` run and publishes its id;
worker runs a Celery worker that takes runs through the owner lease; cancel asks the
run's worker to stop it before its next model or tool call, letting a tool call that is
running finish (a queued run is cancelled at once).
"""

from __future__ import annotations

from typing import Any

import click

from .._log.decisions import decider
from .._log.statuses import Status
from .._text import one_line
from ..pool.agents import load_agents
from ..pool.queued import request_cancel
from ..pool.submission import BROKER_ENV, broker_url, submit_run
from .costs import max_cost_option
from .options import CliUsageError, Env, common, label_option
from .render import console, print_json

_BROKER = click.option("--broker", metavar="URL", envvar=BROKER_ENV, show_envvar=True,
                       help="Celery broker URL (amqp://... or redis://...).")
_QUEUE = click.option("--queue", metavar="NAME", default=None, help="Broker queue (default: Celery's 'celery').")


@click.command()
@click.argument("task")
@click.option("--agent", required=True, metavar="NAME", help="Agent name, as the workers' agents module maps it.")
@_BROKER
@_QUEUE
@label_option("Label the run (repeatable).")
@click.option("--max-steps", type=click.IntRange(min=1), default=None, help="Model calls allowed.")
@click.option("--token-budget", type=click.IntRange(min=1), default=None, help="Tokens allowed.")
@max_cost_option("USD the model calls may cost (priced by the agent's prices option, else genai-prices).")
@click.option("--output-type", metavar="MODULE:ATTR",
              help="End with a typed result: the type a worker imports (a Pydantic model, dataclass, TypedDict).")
@common
def submit(env: Env, task: str, agent: str, broker: str | None, queue: str | None, labels: dict[str, str],
           max_steps: int | None, token_budget: int | None, max_cost_usd: float | None,
           output_type: str | None) -> None:
    """Queue TASK for a worker pool; prints the run id (visible at once as queued).

    A worker whose agent's model has no price refuses a --max-cost-usd run and leaves it queued.
    """
    given = (("max_steps", max_steps), ("token_budget", token_budget), ("max_cost_usd", max_cost_usd))
    limits: dict[str, Any] = {name: value for name, value in given if value is not None}
    url = broker_url(broker)
    with env.store(create=True) as store:
        try:
            run_id, unpublished = submit_run(store, task, agent=agent, broker=url, queue=queue, labels=labels,
                                             output_type=output_type, **limits)
        except ValueError as exc:  # an output type that does not import: nothing was queued
            raise CliUsageError(one_line(exc)) from None
    if env.as_json:
        print_json({"run_id": run_id, "status": Status.QUEUED, "published": unpublished is None})
    else:
        click.echo(run_id)
    if unpublished is not None:
        click.echo(f"note: the broker did not take the run ({one_line(unpublished)}); it stays queued and a worker's "
                   "sweep publishes it when the broker is back", err=True)


@click.command()
@click.option("--agents", "agents_spec", required=True, metavar="MODULE:ATTR",
              help="The mapping of agent names to factories (imported from the current directory or PYTHONPATH).")
@_BROKER
@_QUEUE
@click.option("--concurrency", type=click.IntRange(min=1), default=4, show_default=True,
              help="Runs driven at once (Celery threads).")
@click.option("--sweep-interval", "sweep_s", type=click.FloatRange(min=0.1), default=30.0, show_default=True,
              help="Seconds between sweeps for queued runs never picked up and runs whose worker died.")
@click.option("--requeue-after", "requeue_after_s", type=click.FloatRange(min=0.0), default=60.0,
              show_default=True, help="Seconds a run must sit untouched before a sweep publishes it again.")
@click.option("--loglevel", default="INFO", show_default=True, help="Celery's log level.")
@common
def worker(env: Env, agents_spec: str, broker: str | None, queue: str | None, concurrency: int, sweep_s: float,
           requeue_after_s: float, loglevel: str) -> None:
    """Run a Celery worker that claims, runs and resumes submitted runs (stop it with Ctrl-C)."""
    from ..pool.app import serve

    agents = load_agents(agents_spec)
    serve(env.db, broker_url(broker), agents, concurrency=concurrency, queue=queue, sweep_s=sweep_s,
          requeue_after_s=requeue_after_s, loglevel=loglevel)


@click.command()
@click.argument("run_id")
@click.option("--by", "requested_by", metavar="NAME",
              help="Who asks, logged with the run's cancel_requested fact (default: the OS user).")
@common
def cancel(env: Env, run_id: str, requested_by: str | None) -> None:
    """Cancel RUN: a queued run at once; a running one before its next model or tool call.

    Whatever drives the run (runner run, a worker, the console, run_agent in a script) sees
    the request at its next commit, or within a second while it waits on a model call. A tool
    call already running is let finish and its result logged (cut mid-call, a side effect would
    be left in doubt); a model call is abandoned. The run's timeout_s and its tools' own still
    bound the wait.
    """
    by = requested_by.strip() if requested_by is not None else decider()
    if not by:
        raise click.BadParameter("must name who asks", param_hint="--by")
    with env.store(create=True) as store:
        full = store.resolve_run_id(run_id)
        status = request_cancel(store, full, by)
    if env.as_json:
        print_json({"run_id": full, "status": status, "cancel_requested": True, "requested_by": by})
    elif status == Status.CANCELLED:
        console().print(f"run {full} cancelled")
    else:
        console().print(f"run {full}: cancel requested: it stops before its next model or tool call")
