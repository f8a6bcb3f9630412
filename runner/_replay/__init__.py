"""Replay: the replay driver, divergence reports and the scripted model (fixtures are ``_log.fixture``)."""
