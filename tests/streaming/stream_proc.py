"""A process that streams a slow reply into a store, for a test to SIGKILL mid-reply.

``python -m tests.streaming.stream_proc URL RUN_ID``: the model writes 200 words, 20 ms apart.
"""

from __future__ import annotations

import sys

from runner import ToolRegistry, open_store, run_agent
from tests.streaming.helpers import StreamingModel

SLOW_REPLY = " ".join(f"word{i}" for i in range(200))


def main(url: str, run_id: str) -> None:
    with open_store(url) as store:
        run_agent("Write a lot.", StreamingModel([SLOW_REPLY], pause_s=0.02), ToolRegistry(), store=store,
                  run_id=run_id, stream=True, delta_interval_s=0.1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
