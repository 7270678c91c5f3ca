"""Invoices and money amounts for the billing service."""
