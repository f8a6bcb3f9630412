"""SIGKILL mid-reply: the log keeps the text written so far, and a resume asks the model again and finishes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from runner import Status, ToolRegistry, open_store, resume
from runner.events import ModelCalled, ModelDelta
from tests.resume.helpers import ROOT
from tests.streaming.helpers import StreamingModel
from tests.streaming.stream_proc import SLOW_REPLY


@pytest.mark.process
def test_a_reply_killed_mid_stream_keeps_its_partial_text_and_resume_asks_again(store_url: str) -> None:
    run_id = "killed-mid-reply"
    proc = subprocess.Popen([sys.executable, "-m", "tests.streaming.stream_proc", store_url, run_id], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    with open_store(store_url) as store:
        grown: list[int] = []
        while len(grown) < 3:  # another process sees the text grow, delta by delta, before the reply ends
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            try:
                facts = store.get_run(run_id).facts
            except Exception:
                facts = ()
            size = sum(len(fact.text) for fact in facts if isinstance(fact, ModelDelta))
            if size and (not grown or size > grown[-1]):
                grown.append(size)
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)
        killed = store.get_run(run_id)
        partial = "".join(fact.text for fact in killed.facts if isinstance(fact, ModelDelta))
        assert killed.status == Status.RUNNING
        assert not [fact for fact in killed.facts if isinstance(fact, ModelCalled)]  # the reply never came
        assert 0 < len(partial) < len(SLOW_REPLY)
        assert SLOW_REPLY.startswith(partial)
        model = StreamingModel([SLOW_REPLY])
        result = resume(store, run_id, model, ToolRegistry(), stream=True)
        assert (result.status, result.answer, model.calls) == (Status.DONE, SLOW_REPLY, 1)  # asked again
        assert result.steps == 1
