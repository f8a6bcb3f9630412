"""Play a recording part by part: one core per part, each resumed as the recording's was.

A run that was resumed is recorded in parts; ``Playback`` drives them in turn with the replay
driver and checks that each ended where and as the recording's did. ``replay`` plays a whole
recording at once; a sub-agent's child recording is played a part at a time, as its parent's
replay performs the call again (a child that waited for an approval goes on when its parent does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._log.statuses import Status
from .._loop.core import AgentCore
from .._loop.results import AgentResult
from .._run.build import core_for
from .._run.opening import resumed
from .._run.wiring import RunWiring
from .._tools.registry import ToolRegistry
from ..errors import ReplayDivergence
from .divergence import compare_messages, compare_output, compare_specs
from .driver import ReplayDriver
from .fixture import CRASHED, Fixture
from .parts import PartEnd, Resumption, part_ends, resumptions
from .scripted import ReplayModel

if TYPE_CHECKING:
    from .subagents import ReplayChildren


class Playback:
    """A recording being played against ``core`` (its first part's), a part at a time.

    ``children`` answers the sub-agent calls of the run (None: it has none to answer).
    """

    def __init__(self, fixture: Fixture, model: ReplayModel, registry: ToolRegistry, wiring: RunWiring,
                 core: AgentCore, live_side_effects: bool, children: ReplayChildren | None) -> None:
        self.fixture, self.model, self.registry, self.wiring = fixture, model, registry, wiring
        self.core, self.live_side_effects, self.children = core, live_side_effects, children
        self.ends, self.resumed = part_ends(fixture), resumptions(fixture)
        self.part = 0  # the next part to play
        self.result: AgentResult | None = None  # how the last part played ended (None: as its process died)
        self.divergence: ReplayDivergence | None = None

    @property
    def finished(self) -> bool:
        """Whether every part was played, or one diverged."""
        return self.divergence is not None or self.part >= len(self.ends)

    @property
    def last_part(self) -> bool:
        """Whether the part played last was the recording's last."""
        return self.part >= len(self.ends)

    def play(self) -> None:
        """Play the next part: resume the core as the recording did (after the first), and drive it to its end."""
        part, end = self.part, self.ends[self.part]
        if part > 0:
            self.core = resumed_core(self.core, self.model, self.registry, self.resumed[part - 1], self.wiring)
        self.result, self.divergence = ReplayDriver(self.core, self.model, end, self.live_side_effects,
                                                    self.children).drive()
        self.part += 1
        if self.divergence is None and part < len(self.ends) - 1:
            self.divergence = part_divergence(part, end, self.result, self.model)

    def play_all(self) -> AgentResult:
        """Play every part left, up to the end of the recording or its first divergence; the run's result."""
        while not self.finished:
            self.play()
        final = self.result if self.result is not None else self.core.result
        assert final is not None
        return final

    def final_divergence(self, result: AgentResult) -> ReplayDivergence | None:
        """What a strict replay finds at the end: replies left over, and the whole messages and output compared."""
        fixture, model, core = self.fixture, self.model, self.core
        if model.calls == 0:  # the loop stopped before showing the model anything: still compare the tools
            specs = compare_specs(fixture.first_step, fixture.tool_specs, core.specs)
            if specs is not None:
                return specs
        left = len(fixture.replies) - model.calls
        if left > 0:
            return ReplayDivergence(result.steps, None, "replies",
                                    f"the replay stopped with {result.status} after step {result.steps}, "
                                    f"but the recording has {left} more model repl{'y' if left == 1 else 'ies'}")
        return compare_messages(result.steps, fixture.messages(), result.messages) or compare_output(
            result.steps, fixture.outcome.get("output"), core.output_data)


def resumed_core(before: AgentCore, model: ReplayModel, tools: ToolRegistry, resumption: Resumption,
                 wiring: RunWiring) -> AgentCore:
    """The recording's next part: the same loop resumed with the limits and decisions it was resumed with."""
    state = before.state
    taken = resumed(before.run_id, state.steps, "replay", resumption.reason, resumption.limits, resumption.decisions,
                    tools, model)
    return core_for(model, tools, before.run_id, resumption.limits, [taken], state, wiring, output_spec=before.output)


def part_divergence(part: int, end: PartEnd, result: AgentResult | None,
                    model: ReplayModel) -> ReplayDivergence | None:
    """Whether the replay's part ``part`` ended where and as the recording's did (before a resume)."""
    status = CRASHED if result is None else result.status  # None: it gave up where the recorded process died
    want = Status.CANCELLED if end.crashed and result is not None else end.status
    steps = result.steps if result is not None else 0
    if status != want:
        return ReplayDivergence(steps, None, "resumes",
                                f"part {part + 1} of the replay ended with {status}, the recording's with "
                                f"{end.status} (where it was resumed)")
    if model.calls != end.after_replies:
        return ReplayDivergence(steps, None, "resumes",
                                f"part {part + 1} of the replay ended after {model.calls} model replies, the "
                                f"recording's after {end.after_replies} (where it was resumed)")
    return None
