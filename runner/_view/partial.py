"""The reply a run's model is still writing, from its ``model_delta`` facts: what the run page shows growing.

A streamed reply is logged as deltas while it is written, and whole as ``model_call`` once it is done;
the deltas logged after a step's last model call are a reply not (yet) logged whole: still written by a
live run, or cut off by a crash. A model call that failed (a cancel, an error) cuts the text before it
off. Each delta goes at its ``offset``; a new attempt starts again at 0.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .._log.records import StoredRun
from ..events import ModelCalled, ModelDelta, RunResumed


@dataclass(frozen=True, slots=True)
class Partial:
    """A reply's text so far: its step, the ``seq`` of its last delta (a follower adds those past it).

    ``cut``: its model call ended without a reply (cancelled, failed): nothing more is being written to it.
    """

    step: int
    text: str
    seq: int
    cut: bool = False


def partial_reply(run: StoredRun) -> Partial | None:
    """The text of the reply ``run``'s log holds deltas of but no model call for yet; None when there is none.

    A resume asks the model again: what a reply had written before it is no longer being written.
    """
    partial: Partial | None = None
    for event, fact in zip(run.events, run.facts, strict=True):
        match fact:
            case ModelDelta(step=step, text=text, offset=offset):
                before = partial.text if partial is not None and partial.step == step else ""
                partial = Partial(step, before[:offset] + text, event.seq)
            case ModelCalled(reply=None) if partial is not None and partial.step == fact.step:
                partial = replace(partial, cut=True)
            case ModelCalled() | RunResumed():
                partial = None
    return partial
