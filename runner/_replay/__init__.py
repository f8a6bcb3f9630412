"""Replay: fixtures, the replay driver, divergence reports and the scripted model."""
