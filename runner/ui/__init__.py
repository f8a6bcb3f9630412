"""The console (``runner ui``): runs, a run's timeline, an approvals inbox, fork, resume and cancel, in a browser.

Install it with the ``ui`` extra (Starlette, uvicorn, Jinja2). ``create_app(store)`` is the ASGI
app; ``runner ui`` serves it on 127.0.0.1. See docs/console.md.
"""

from .app import create_app

__all__ = ["create_app"]
