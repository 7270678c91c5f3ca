"""The language a path is chunked as, from its extension: a module of its own, with no
imports, so that checking a workspace against the index (``stat_check.py``) loads no chunker."""

from __future__ import annotations

_LANGUAGES = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".ts": "typescript", ".tsx": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".go": "go", ".rs": "rust", ".java": "java", ".kt": "kotlin", ".kts": "kotlin",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp",
    ".hh": "cpp", ".cs": "csharp", ".swift": "swift", ".scala": "scala", ".php": "php",
    ".css": "css", ".scss": "css", ".json": "json",
    ".md": "markdown", ".markdown": "markdown", ".mdx": "markdown",
    ".log": "log",
}


def language_of(path: str) -> str:
    """The language a path is chunked as, from its extension ("text" when unknown)."""
    name = file_name(path).lower()
    if ".log." in name:  # rotated logs: app.log.1
        return "log"
    dot = name.rfind(".")
    return _LANGUAGES.get(name[dot:] if 0 < dot < len(name) - 1 else "", "text")  # PurePath.suffix's rule


def file_name(path: str) -> str:
    """``PurePosixPath(path.replace("\\", "/")).name`` without making a path object (every
    walked file is classified on each re-index: the objects were most of that time)."""
    for part in reversed(path.replace("\\", "/").split("/")):
        if part and part != ".":
            return part
    return ""
