"""A pool of workers: runs submitted to a broker, driven by ``runner worker`` processes.

Celery distributes (at least once); the store decides. ``submit`` records a run as
``queued`` (a ``run_queued`` fact with its task, agent name and chosen limits) and
publishes only its id. A worker's task takes the run through the owner lease (an
atomic compare-and-set) and starts it, or resumes it when it had started, so a
redelivered run continues where it stopped and its side effects follow resume's
in-doubt rules. A redelivery for a finished run, or one live in another worker, is
acknowledged and dropped.

Importing this package does not import Celery: only ``pool.app`` does, and only the
publishing and worker paths import that.

- ``agents``  an agents module (``module:attr``) and the ``(model, registry[, options])`` it builds
- ``queued``  what the pool asks of the store (which keeps the queue): a checked submission, a cancel
- ``take``    the task body: claim, then start or resume (no Celery in it, so tests call it)
- ``submission`` ``submit()``: record, then publish
- ``app``     the Celery app, its one task, the worker and its sweep thread
"""

from __future__ import annotations

from .submission import submit

__all__ = ["submit"]
