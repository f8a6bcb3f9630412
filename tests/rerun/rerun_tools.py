"""The ``--tools`` of the rerun tests: each tool notes every time it really runs in ``RAN``.

``send_email`` has side effects and ``transfer`` needs approval: a rerun runs neither, whatever the model asks.
"""

from __future__ import annotations

from runner import ToolRegistry

RAN: list[tuple[str, dict[str, object]]] = []
TEMPERATURES = {"Paris": 21, "Oslo": 4, "Lima": 18}


def tools() -> ToolRegistry:
    """A new registry over the same ``RAN`` list."""
    registry = ToolRegistry()

    @registry.tool
    def get_weather(city: str) -> dict[str, object]:
        """The temperature in a city, in Celsius."""
        RAN.append(("get_weather", {"city": city}))
        return {"city": city, "celsius": TEMPERATURES.get(city, 10)}

    @registry.tool
    def c_to_f(celsius: float) -> float:
        """Celsius to Fahrenheit."""
        RAN.append(("c_to_f", {"celsius": celsius}))
        return round(celsius * 9 / 5 + 32, 1)

    @registry.tool(side_effects=True)
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        RAN.append(("send_email", {"to": to, "body": body}))
        return f"sent to {to}"

    @registry.tool(side_effects=True, needs_approval=True)
    def transfer(to: str, amount: int) -> str:
        """Move money."""
        RAN.append(("transfer", {"to": to, "amount": amount}))
        return f"moved {amount} to {to}"

    return registry
