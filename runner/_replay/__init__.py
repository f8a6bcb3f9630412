"""Replay: the fixture file format, the replay driver, divergence reports and the scripted model."""
