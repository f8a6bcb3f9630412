"""Agents by name: a user module maps names to factories, each called afresh per run.

``agents = {"tipper": make_tipper}`` where ``make_tipper()`` returns ``(model, registry)``
or ``(model, registry, options)``, options being ``run_agent`` keyword options
(``system``, ``max_steps``, ``token_budget``, the other limits, ``labels``...).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._tools.registry import ToolRegistry
from ..errors import RunnerError

Factory = Callable[[], Any]


class PoolError(RunnerError):
    """A worker pool's configuration mistake: a bad agents module, an unknown agent, no broker."""


@dataclass(frozen=True, slots=True)
class Agent:
    """What a factory built for one run."""

    model: Any
    registry: ToolRegistry
    options: dict[str, Any] = field(default_factory=dict)


def load_agents(spec: str) -> Mapping[str, Factory]:
    """The mapping at ``module:attr``, the module imported from the current directory or ``PYTHONPATH``."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise PoolError(f"agents must be given as module:attr, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise PoolError(f"cannot import agents module {module_name!r}: {type(exc).__name__}: {exc}") from None
    found = getattr(module, attr, None)
    if not isinstance(found, Mapping):
        raise PoolError(f"{spec} must be a mapping of agent names to factories, got {type(found).__name__}")
    for name, factory in found.items():
        if not isinstance(name, str) or not callable(factory):
            raise PoolError(f"{spec}: entry {name!r} must map a name to a callable factory")
    return found


def build_agent(agents: Mapping[str, Factory], name: str | None) -> Agent:
    """Call agent ``name``'s factory and check what it returned."""
    factory = agents.get(name) if name is not None else None
    if factory is None:
        raise PoolError(f"unknown agent {name!r} (this worker knows: {sorted(agents)})")
    built = factory()
    if not isinstance(built, tuple) or len(built) not in (2, 3):
        raise PoolError(f"agent {name!r}'s factory must return (model, registry) or (model, registry, options)")
    model, registry, *rest = built
    options = rest[0] if rest else {}
    if not isinstance(registry, ToolRegistry) or not callable(model) or not isinstance(options, Mapping):
        raise PoolError(f"agent {name!r}'s factory returned ({type(model).__name__}, {type(registry).__name__}, "
                        "...): expected a model callable, a ToolRegistry and a mapping of options")
    return Agent(model, registry, dict(options))
