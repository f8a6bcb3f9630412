"""The agent loop: the sans-IO core, its sync and async drivers, limits, and resume, fork and follow-up."""
