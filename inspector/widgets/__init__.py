"""Reusable widgets of the inspector."""
