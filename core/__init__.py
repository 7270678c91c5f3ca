"""scopelens core: the scoped-retrieval engine and its audit store.

Importing ``scopelens.core`` must stay light: it never imports the inspector or textual.
"""

from __future__ import annotations

__version__ = "0.1.0"
ENGINE_VERSION = f"scopelens-core/{__version__}"
