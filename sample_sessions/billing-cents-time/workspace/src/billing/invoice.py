"""Invoice totals."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InvoiceLine:
    description: str
    unit_price: int
    """Integer cents, as parse_price returns them."""
    quantity: int = 1


def invoice_total(lines: list[InvoiceLine]) -> float:
    """The total of an invoice in dollars, rounded to two places."""
    return round(sum(line.unit_price * line.quantity for line in lines) / 100, 2)
