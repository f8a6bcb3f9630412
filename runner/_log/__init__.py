"""The log's vocabulary beside the facts: statuses, the state folded from facts, derived ids."""
