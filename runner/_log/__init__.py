"""The log's vocabulary beside the facts: statuses, limits, folded state, records, decisions, ids.

The kernel: every other part imports it, and it does no I/O (no files, processes or sockets).
"""
