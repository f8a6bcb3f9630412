"""A run's assembly: its options, wiring and opening facts, and resume, fork and follow-up over the loop."""
