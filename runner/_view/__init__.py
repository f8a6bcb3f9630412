"""A stored run as plain data, shared by the CLI and the console: summaries, lineage, what a run inherited.

No terminal and no web here: ``--json`` output and the console's JSON API are the same values.
"""
