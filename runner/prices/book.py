"""Prices by model, looked up in genai-prices unless the caller gave one, and the cost of one call."""

from __future__ import annotations

import json
import math
import os
import stat
import sys
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ..messages import Cost, Usage

MTOK = 1_000_000
MAX_PRICES_BYTES = 1_000_000  # a prices file is a few tables: more is a mistake, not prices
GIVEN = "given"  # the price source of a price the caller gave


Costing = Callable[["Usage | None"], "Cost | None"]  # one model call's cost, from the usage it reported


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens. Cached prompt tokens take their own price when one is set, else the input price."""

    input_mtok: float
    output_mtok: float
    cache_read_mtok: float | None = None
    cache_write_mtok: float | None = None

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if value is None and field.name.startswith("cache"):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"price {field.name} must be a non-negative number of USD, got {value!r}")

    def cost(self, usage: Usage, source: str = GIVEN) -> Cost:
        """What ``usage`` costs at this price, in USD, with its prompt and completion parts."""
        read, write = usage.cache_read_tokens, usage.cache_write_tokens
        fresh = max(usage.input_tokens - read - write, 0)
        prompt = (fresh * self.input_mtok + read * _or(self.cache_read_mtok, self.input_mtok)
                  + write * _or(self.cache_write_mtok, self.input_mtok)) / MTOK
        completion = usage.output_tokens * self.output_mtok / MTOK
        return capped(Cost(prompt + completion, source, prompt, completion))


def capped(cost: Cost) -> Cost:
    """``cost`` with each amount past the largest float (inf) as the largest: still over any budget, and JSON."""
    def cap(usd: float | None) -> float | None:
        return None if usd is None else min(usd, sys.float_info.max)

    return Cost(min(cost.usd, sys.float_info.max), cost.source, cap(cost.prompt_usd), cap(cost.completion_usd))


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


class PriceBook:
    """The prices a run is costed with: the caller's (by model name) first, then genai-prices'.

    A model genai-prices does not know, with no price given, has no cost (None), never a guess.
    """

    def __init__(self, given: Mapping[str, Price | Mapping[str, float]] | None = None) -> None:
        self.given: dict[str, Price] = {}
        for model, price in (given or {}).items():
            if not isinstance(model, str) or not model:
                raise ValueError(f"prices are keyed by model name, got {model!r}")
            self.given[model] = price if isinstance(price, Price) else _price(model, price)
        self._found: dict[tuple[str | None, str], Any] = {}

    def knows(self, provider: str | None, model: str) -> bool:
        """Whether a call of ``model`` can be costed."""
        return model in self.given or self._table(provider, model) is not None

    def cost(self, provider: str | None, model: str, usage: Usage | None) -> Cost | None:
        """What a call of ``model`` that used ``usage`` costs; None without usage or a price."""
        if usage is None:
            return None
        given = self.given.get(model)
        if given is not None:
            return given.cost(usage)
        found = self._table(provider, model)
        if found is None:
            return None
        model_price, source = found
        from genai_prices import Usage as Counted

        price = model_price.calc_price(Counted(
            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens or None, cache_write_tokens=usage.cache_write_tokens or None))
        return capped(Cost(float(price["total_price"]), source, float(price["input_price"]),
                           float(price["output_price"])))

    def _table(self, provider: str | None, model: str) -> tuple[Any, str] | None:
        """genai-prices' price of ``model`` now (looked up once per book), with its source; None if unknown."""
        key = (provider, model)
        if key not in self._found:
            self._found[key] = _look_up(provider, model)
        found: tuple[Any, str] | None = self._found[key]
        return found


def _look_up(provider: str | None, model: str) -> tuple[Any, str] | None:
    try:
        import genai_prices
    except ImportError:  # the table is a dependency; a broken install costs nothing rather than failing runs
        return None
    try:
        found = genai_prices.calc_price(genai_prices.Usage(input_tokens=0, output_tokens=0), model,
                                        provider_id=provider or None)
    except (LookupError, ValueError):
        return None
    return found.model_price, f"genai-prices {genai_prices.__version__} {found.provider.id}:{found.model.id}"


def _price(model: str, value: Mapping[str, float]) -> Price:
    if not isinstance(value, Mapping):
        raise ValueError(f"price of {model!r} must map input_mtok and output_mtok to USD, got {value!r}")
    names = {field.name for field in fields(Price)}
    unknown = sorted(set(value) - names)
    if unknown:
        raise ValueError(f"price of {model!r}: unknown key(s) {', '.join(map(repr, unknown))} "
                         f"(known: {', '.join(sorted(names))})")
    try:
        return Price(**value)
    except TypeError:
        raise ValueError(f"price of {model!r} needs input_mtok and output_mtok (USD per million tokens)") from None
    except ValueError as exc:
        raise ValueError(f"price of {model!r}: {exc}") from None


def load_prices(path: str | Path) -> dict[str, Price]:
    """The prices in a TOML or JSON file: a table per model name with ``input_mtok`` and ``output_mtok``.

    A path that is not a regular file (``/dev/zero``, a FIFO, a folder) or is over 1 MB is
    refused before a byte is read: reading one could block or never end.
    """
    target = Path(path)
    try:
        text = _small_file(target).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read prices from {target}: {exc}") from None
    try:
        data = json.loads(text) if target.suffix.lower() == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"prices file {target} is not valid {'JSON' if target.suffix == '.json' else 'TOML'}: "
                         f"{exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"prices file {target} must hold a table per model name")
    return {model: _price(model, value) for model, value in data.items()}


def _small_file(target: Path) -> bytes:
    """The bytes of ``target``, a regular file of at most ``MAX_PRICES_BYTES``; else a ``ValueError``."""
    fd = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO's open does not wait for a writer
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"prices file {target} is not a regular file")
        if info.st_size > MAX_PRICES_BYTES:
            raise ValueError(f"prices file {target} is over 1 MB")
        chunks: list[bytes] = []
        while chunk := os.read(fd, MAX_PRICES_BYTES + 1 - sum(map(len, chunks))):  # it may grow after fstat
            chunks.append(chunk)
            if sum(map(len, chunks)) > MAX_PRICES_BYTES:
                raise ValueError(f"prices file {target} is over 1 MB")
        return b"".join(chunks)
    finally:
        os.close(fd)


def price_book(prices: PriceBook | Mapping[str, Price | Mapping[str, float]] | None) -> PriceBook:
    """A ``PriceBook`` from what a caller passed as ``prices=``."""
    return prices if isinstance(prices, PriceBook) else PriceBook(prices)
