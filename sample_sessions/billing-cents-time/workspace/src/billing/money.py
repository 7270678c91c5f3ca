"""Money amounts: parsing prices and formatting them for invoices."""

from __future__ import annotations

from decimal import Decimal


def parse_price(text: str) -> int:
    """A price written as dollars ("19.99") in integer cents (1999)."""
    return int((Decimal(text) * 100).to_integral_value())


def format_price(cents: int) -> str:
    """Integer cents as a dollar string for an invoice line ("$19.99")."""
    return f"${cents // 100}.{cents % 100:02d}"
