"""Screens of the inspector, one per module, each with its .tcss beside it."""
