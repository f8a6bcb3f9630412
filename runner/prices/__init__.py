"""What a model call costs in USD: prices from genai-prices (kept by the Pydantic team), or given by the caller.

A call's cost is worked out once, when it returns, and logged with it (``model_called``), so a
later price change never rewrites a stored run. See docs/cost.md.
"""

from ..messages import Cost
from .book import Costing, Price, PriceBook, load_prices, price_book

__all__ = ["Cost", "Costing", "Price", "PriceBook", "load_prices", "price_book"]
