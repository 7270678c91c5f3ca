from billing.invoice import InvoiceLine, invoice_total
from billing.money import parse_price


def test_invoice_total_in_cents():
    lines = [InvoiceLine("seat", parse_price("19.99"))]
    assert invoice_total(lines) == 1999


def test_invoice_total_of_two_lines():
    lines = [InvoiceLine("seat", parse_price("10.00"), 2), InvoiceLine("support", parse_price("5.50"))]
    assert invoice_total(lines) == 2550
