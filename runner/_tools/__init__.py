"""Tools: the registry, typed functions as tools, and JSON Schema checks of a call's arguments."""
