"""The edge gateway: routing and per-client rate limiting."""
