"""Turn text into the lowercase terms that BM25 indexes and queries are built from.

Code and prose are tokenized the same way, so a query finds what the index stored:

* A *compound* (``os.path.join``, ``src/auth/session.ts``, ``tests/x.py::TestY``,
  ``user-session``) is kept whole and split at ``/`` and ``::``, then at ``.`` and ``-``,
  then at ``_``, then at case changes (``HTTPServer`` -> ``http``, ``server``). Every level is
  emitted, so ``createUserMock`` gives ``createusermock``, ``create``, ``user``, ``mock`` and
  ``src/auth/session.ts`` gives the path, ``src``, ``auth``, ``session.ts``, ``session``,
  ``ts``.
* Han, Kana and Hangul runs become overlapping character bigrams (a lone character stays a
  unigram), so Japanese, Chinese and Korean text is found without a dictionary.
* Non-ASCII text is NFKC-normalised first (full-width ``ＡＢＣ`` and half-width kana fold).
* Single digits and tokens with no letter or digit are dropped, and compounds longer than 128
  characters (base64 blobs) keep only their parts; order and duplicates are kept because
  term frequency matters.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from itertools import chain

CJK_RANGES = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3005-\u3007"  # 々 〆 〇
    "\u3041-\u3096\u309d-\u309f"  # Hiragana
    "\u30a1-\u30fa\u30fc-\u30ff"  # Katakana (not the middle dot ・)
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Han
    "\uac00-\ud7af"  # Hangul syllables
    "\U00020000-\U0003134f"  # Han extensions B and later
)
"""The one table of CJK characters (Han, Kana, Hangul): the tokenizer makes bigrams of their
runs, the planner keeps a CJK word however short, and the token estimate counts each as a
token (``pipeline/trim.py``)."""
CJK_CHAR = re.compile(f"[{CJK_RANGES}]")
_WORD = rf"[^\W{CJK_RANGES}]"  # a word character that is not CJK
_JOIN = r"(?:::|[./\-])"
_CHUNK = re.compile(rf"([{CJK_RANGES}]+)|({_WORD}+(?:{_JOIN}{_WORD}+)*)")
"""A CJK run, or a word possibly joined into a compound by ``::``, ``/``, ``.`` or ``-``."""
_ASCII_CHUNK = re.compile(rf"[A-Za-z0-9_]+(?:{_JOIN}[A-Za-z0-9_]+)*")
"""``_CHUNK`` for ASCII text, where it is more than twice as fast."""


def _split_path(word: str) -> list[str]:
    return word.replace("::", "/").split("/")


def _split_dotted(word: str) -> list[str]:
    return word.replace("-", ".").split(".")


def _split_snake(word: str) -> list[str]:
    return word.split("_")


_SPLITTERS = (_split_path, _split_dotted, _split_snake)
"""Compounds are split coarsest first (str methods: far cheaper than regexes here)."""

_CAMEL = re.compile(r"[A-Z]{2,}s(?![a-z])|[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z]+[0-9]*")
"""Case humps: ``HTTPServer`` -> HTTP Server, ``parseJSON2`` -> parse JSON2, ``IDs`` whole."""
_SIMPLE = re.compile(r"[a-z0-9]+")
_MAX_WHOLE = 128
"""Longer compounds (base64 blobs, minified chains) are indexed by their parts only."""


def tokenize(text: str) -> list[str]:
    """Lowercase terms of ``text`` in order of appearance, duplicates kept."""
    if text.isascii():
        return list(chain.from_iterable(map(_expand, _ASCII_CHUNK.findall(text))))
    text = unicodedata.normalize("NFKC", text)
    out: list[str] = []
    extend = out.extend
    for cjk, word in _CHUNK.findall(text):
        extend(_expand(word) if word else _bigrams(cjk))
    return out


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a CJK character once NFKC-normalised, as the tokenizer sees it."""
    if text.isascii():
        return False
    return CJK_CHAR.search(unicodedata.normalize("NFKC", text)) is not None


def unique_terms(text: str) -> list[str]:
    """The distinct terms of ``text``, in order of first appearance (for queries)."""
    return list(dict.fromkeys(tokenize(text)))


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


@lru_cache(maxsize=1 << 17)
def _expand(word: str) -> tuple[str, ...]:
    """A word or compound and all its parts; cached because code repeats its identifiers."""
    if _SIMPLE.fullmatch(word):
        return (word,) if _keep(word) else ()
    out = [word.lower()] if len(word) <= _MAX_WHOLE else []
    pieces = [word]
    for split in _SPLITTERS:
        finer: list[str] = []
        for piece in pieces:
            parts = [p for p in split(piece) if p]
            if parts != [piece]:  # "_private" -> "private" counts as a split too
                out += [p.lower() for p in parts]
            finer += parts
        pieces = finer
    for piece in pieces:
        # ASCII only: a case split of "Straße" or "Über" would cut words apart.
        if piece.isascii() and not piece.islower() and not piece.isupper():
            humps = _CAMEL.findall(piece)
            if len(humps) > 1:
                out += [h.lower() for h in humps]
    return tuple([t for t in out if _keep(t)])


def _keep(token: str) -> bool:
    # Pieces are runs of word characters, so only underscores can leave one without content.
    if len(token) == 1:
        return token.isalpha()
    return bool(token.strip("_"))
