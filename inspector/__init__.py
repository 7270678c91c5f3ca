"""scopelens inspector: a Textual app over the audit store, reading only core's read model."""
