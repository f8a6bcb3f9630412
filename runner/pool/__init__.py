"""A pool of workers: runs submitted to a broker, driven by ``runner worker`` processes.

Celery distributes, at least once; the store decides. ``submit`` records a run as ``queued``
and publishes only its id; a worker takes it through the owner lease, then starts or
resumes it. Importing this package does not import Celery: only ``pool.app`` does, and
only the publishing and worker paths import that. The whole story: docs/workers.md.

The modules::

    agents      an agents module (``module:attr``) and the ``(model, registry[, options])`` it builds
    queued      what the pool asks of the store (which keeps the queue): a checked submission, a cancel
    take        the task body: claim, then start or resume (no Celery in it, so tests call it)
    submission  ``submit()``: record, then publish
    app         the Celery app, its one task, the worker and its sweep thread
"""

from __future__ import annotations

from .submission import submit

__all__ = ["submit"]
