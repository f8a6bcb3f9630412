"""Reading the filters of a list of runs from text: when a run started (``30m``, ``2h``, an ISO date).

``runner runs --since`` and the console's ``?since=`` read the same words the same way.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

RELATIVE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_when(value: str, now: datetime | None = None) -> datetime:
    """``30m``, ``2h``, ``3d``, ``1w`` ago, or an ISO date or datetime (UTC unless it has an offset)."""
    text = value.strip()
    relative = RELATIVE.fullmatch(text)
    if relative:
        amount, unit = relative.groups()
        try:
            return (now or datetime.now(UTC)) - timedelta(**{UNITS[unit]: float(amount)})
        except OverflowError:
            raise ValueError(f"{value!r} reaches before the year 1") from None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"expected a duration ago (30m, 2h, 3d, 1w) or an ISO date/datetime, got {value!r}") \
            from None
    try:
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-23:00 is in the year 10000 in UTC
        raise ValueError(f"{value!r} is outside the years 1 to 9999 in UTC") from None
