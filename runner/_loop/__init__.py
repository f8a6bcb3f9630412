"""The agent loop: the sans-IO core, the one drive loop and its sync and async drivers; no store, no tracer."""
