"""The log's vocabulary beside the facts: statuses, limits, folded state, decisions, ids, fixtures.

The fixture is a stored run's portable form, so it lives with the log rather than with replay.
"""
