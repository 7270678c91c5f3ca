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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, count, repeat

import numpy as np

from scopelens.core.index.native import compiled

TOKENIZER_VERSION = 1
"""Changes whenever the terms of some text change (pinned in the engine config, with the
chunker's version, so drift tells snapshots made from one index form from another)."""

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


_CAMEL = re.compile(r"[A-Z]{2,}s(?![a-z])|[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z]+[0-9]*")
"""Case humps: ``HTTPServer`` -> HTTP Server, ``parseJSON2`` -> parse JSON2, ``IDs`` whole."""
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


def _word_terms(word: str) -> tuple[str, ...]:
    """A word or compound and all its parts (the module doc's rules).

    Each level splits the pieces of the one before: at ``/`` and ``::``, at ``.`` and ``-``,
    at ``_``, then at case changes (ASCII pieces only: a case split of "Straße" would cut a
    word apart). A level that does not change a piece adds nothing, except that "_private"
    -> "private" counts as a split. A level whose separators the word does not hold is
    skipped: most identifiers need one or two ``str`` calls, not a pass of each level.
    """
    if word.isascii() and word.isalnum() and (word.islower() or word.isdigit()):
        return (word,) if len(word) > 1 or word.isalpha() else ()
    out = [word] if len(word) <= _MAX_WHOLE else []
    pieces = [word]
    if "/" in word or ":" in word:
        pieces = [p for p in word.replace("::", "/").split("/") if p]
        if pieces != [word]:
            out += pieces
    if "." in word or "-" in word:
        pieces = _split_each(pieces, out, _dotted_parts)
    if "_" in word:
        pieces = _split_each(pieces, out, _snake_parts, "_")
    return _humps_and_kept(word, pieces, out)


def _humps_and_kept(word: str, pieces: list[str], out: list[str]) -> tuple[str, ...]:
    """The last level of ``word``'s expansion: ``pieces`` split at case changes (ASCII pieces
    only), added to ``out``; then every term of ``out`` lowered, and those kept that the
    rule keeps."""
    if not word.islower() and not word.isupper():
        for piece in pieces:
            if not piece.islower() and not piece.isupper() and piece.isascii():
                humps = _CAMEL.findall(piece)
                if len(humps) > 1:
                    out += humps
    # One lower() for all: pieces hold no space, and a space bounds str.lower()'s only
    # context rule (a final sigma), so this equals lowering each piece. Kept: a single letter,
    # or two characters or more that are not all underscores (pieces are runs of word
    # characters, so only underscores can leave one without content); written inline, as a
    # call per term was a quarter of the expansion's time.
    return tuple([t for t in " ".join(out).lower().split(" ") if (t.isalpha() if len(t) == 1 else t.strip("_"))])


def _split_each(
    pieces: list[str], out: list[str], split: Callable[[str], list[str]], separator: str | None = None
) -> list[str]:
    """Split every piece, adding the parts of those that change to ``out``; the parts. A piece
    without ``separator`` (when given) is left whole without calling ``split``."""
    finer: list[str] = []
    for piece in pieces:
        if separator is not None and separator not in piece:
            finer.append(piece)
            continue
        parts = [p for p in split(piece) if p]
        if parts != [piece]:
            out += parts
        finer += parts
    return finer


def _dotted_parts(piece: str) -> list[str]:
    return piece.replace("-", ".").split(".")


def _snake_parts(piece: str) -> list[str]:
    return piece.split("_")


_expand = lru_cache(maxsize=1 << 17)(_word_terms)
"""``_word_terms`` cached for ``tokenize`` (queries): code repeats its identifiers."""


_ANY_WORD = re.compile(rf"[{CJK_RANGES}]+|{_WORD}+(?:{_JOIN}{_WORD}+)*")
"""``_CHUNK`` without groups: a CJK run or a (compound) word, as one string."""


@dataclass(frozen=True)
class TermCounts:
    """The terms of a list of texts grouped into units (a chunk's text, path and symbol are
    one unit), counted: what ``Counter(tokenize(...))`` gives per unit, for all units at once.

    Unit ``u`` has the terms ``terms[term_ids[bounds[u]:bounds[u + 1]]]`` (ascending term
    ids, each once) occurring ``tfs[...]`` times, and ``lengths[u]`` tokens in all. ``terms``
    may hold terms of other units too: the documents of one batch share it (``slice``).
    """

    terms: list[str]
    bounds: np.ndarray
    term_ids: np.ndarray
    tfs: np.ndarray
    lengths: np.ndarray

    def slice(self, lo: int, hi: int) -> TermCounts:
        """Units ``lo`` to ``hi`` (one document of a batch): array views, and the same list of
        term strings (the batch's, shared)."""
        first, last = int(self.bounds[lo]), int(self.bounds[hi])
        return TermCounts(
            self.terms, self.bounds[lo : hi + 1] - first, self.term_ids[first:last], self.tfs[first:last], self.lengths[lo:hi]
        )

    def unit(self, u: int) -> dict[str, int]:
        """Unit ``u`` as ``term -> count`` (for tests and debugging)."""
        lo, hi = int(self.bounds[u]), int(self.bounds[u + 1])
        return {self.terms[t]: int(c) for t, c in zip(self.term_ids[lo:hi].tolist(), self.tfs[lo:hi].tolist(), strict=True)}


class _Expansions:
    """Atoms (``_word_fans``: words without a separator, and the runs between a compound's
    separators) to their terms, remembered across calls (code repeats its words).

    Two generations of at most ``LIMIT`` words each: a word looked up moves to the recent
    one, and when that is full the older one is dropped. Words in use survive (a clear-all
    cache re-expanded 2.6 times as many words on the standard library), and memory stays
    bounded on any corpus: about 8 MiB (16 MiB at 25,000 words, measured with tracemalloc on
    the standard library, for 10% fewer words expanded: 254k against 281k, 0.1 s); every preparing process, the indexing
    one included, keeps one). Words are expanded without ``_expand``'s cache (which
    serves queries): a preparing worker would otherwise keep every distinct word twice."""

    LIMIT = 12_500

    def __init__(self) -> None:
        self.recent: dict[str, tuple[str, ...]] = {}
        self.older: dict[str, tuple[str, ...]] = {}

    def lookup(self, distinct_words: list[str]) -> list[tuple[str, ...]]:
        if len(self.recent) > self.LIMIT:
            self.older, self.recent = self.recent, {}
        recent, older = self.recent, self.older
        found = list(map(recent.get, distinct_words))  # in C: most words of a batch are known
        for at in [at for at, terms in enumerate(found) if terms is None]:
            word = distinct_words[at]
            terms = older.get(word)
            if terms is None:
                terms = _expand_word(word)
            recent[word] = found[at] = terms
        return found  # type: ignore[return-value]  # every None was replaced


def _expand_word(word: str) -> tuple[str, ...]:
    """The terms of one atom or word found by ``count_terms``'s regexes (``tokenize``'s, per word)."""
    if CJK_CHAR.match(word):
        return tuple(_bigrams(word))
    if len(word) > _MAX_WHOLE and _JOINED.search(word):
        return _word_terms(word)  # a compound too long to be split into atoms (``_word_fans``)
    return _atom_terms(word)


def _atom_terms(atom: str) -> tuple[str, ...]:
    """``_word_terms`` of a word without ``/``, ``:``, ``.`` or ``-``: only its ``_`` and case
    levels, and the ``_`` level always splits (no part of an atom holding ``_`` is the atom)."""
    if atom.isascii() and atom.isalnum() and (atom.islower() or atom.isdigit()):
        return (atom,) if len(atom) > 1 or atom.isalpha() else ()
    out = [atom] if len(atom) <= _MAX_WHOLE else []
    pieces = [atom]
    if "_" in atom:
        pieces = [piece for piece in atom.split("_") if piece]
        out += pieces
    return _humps_and_kept(atom, pieces, out)


_EXPANSIONS = _Expansions()


_JOINED = re.compile(r"[./:\-]")
"""A word holding one of these is a compound (``_JOIN``)."""
_ATOM_SEPARATOR = re.compile(r"::|[./\-\n]")
"""Between the atoms of compounds joined by newlines."""
_SEPARATOR_WEIGHT = np.zeros(128, dtype=np.int64)
_SEPARATOR_WEIGHT[[ord(c) for c in "./-"]] = 2
_SEPARATOR_WEIGHT[ord(":")] = 1  # "::" is one separator
_SEPARATOR_WEIGHT_U8 = np.zeros(256, dtype=np.int64)
_SEPARATOR_WEIGHT_U8[:128] = _SEPARATOR_WEIGHT


def _word_fans(distinct: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The terms of each distinct word: ``(terms, part_bounds, parts)``, word ``w`` giving
    ``terms[t]`` for ``t`` in ``parts[part_bounds[w]:part_bounds[w + 1]]``, in no set order
    within a word (counts do not need one).

    A compound of at most ``_MAX_WHOLE`` characters gives what ``_word_terms`` gives, as
    a multiset: itself, the parts between ``/`` and ``::`` that hold ``.`` or ``-`` (they are
    split further), and the terms of each of its *atoms*, the runs between separators, as
    ``_word_terms`` gives them for the atom alone (its levels split each piece on its own).
    So only the distinct atoms are expanded in Python (cached across calls: code repeats
    them far more than its compounds); compounds are split and lowered a batch at a time.
    Other words (no separator, a blob over ``_MAX_WHOLE``, a CJK run) are their own atom.
    """
    compound_at = [at for at, word in enumerate(distinct) if len(word) <= _MAX_WHOLE and _JOINED.search(word)]
    compounds = [distinct[at] for at in compound_at]
    is_compound = np.zeros(len(distinct), dtype=bool)
    is_compound[compound_at] = True
    simple_at = np.flatnonzero(~is_compound)
    # Each word's atoms: a simple word is its own; a compound's come from one split of them all.
    joined = "\n".join(compounds)
    compound_atoms = _ATOM_SEPARATOR.split(joined) if compounds else []
    atoms_per_compound = _separators_per_line(joined, len(compounds)) + 1
    atom_words = np.concatenate([simple_at, np.repeat(np.asarray(compound_at, dtype=np.int64), atoms_per_compound)])
    atom_ids, atoms = _first_seen_ids([*map(distinct.__getitem__, simple_at.tolist()), *compound_atoms])
    # Each distinct atom's terms (cached across calls), numbered with the compounds' own terms.
    expansions = _EXPANSIONS.lookup(atoms)
    atom_fans = np.fromiter(map(len, expansions), dtype=np.int64, count=len(expansions))
    atom_bounds = np.zeros(len(expansions) + 1, dtype=np.int64)
    np.cumsum(atom_fans, out=atom_bounds[1:])
    term_numbers: dict[str, int] = {}
    number_term = term_numbers.setdefault
    atom_parts = np.fromiter(
        map(number_term, chain.from_iterable(expansions), map(len, repeat(term_numbers))),
        dtype=np.int64, count=int(atom_bounds[-1]),
    )
    # A compound's own terms: itself, lowered (one lower() for all: a newline bounds
    # str.lower()'s only context rule, a final sigma), and its dotted parts between slashes.
    wholes = joined.lower().split("\n") if compounds else []
    whole_words = np.asarray(compound_at, dtype=np.int64)
    middles: list[str] = []
    middle_words: list[int] = []
    for at, word in zip(compound_at, compounds, strict=True):
        if "/" in word or ":" in word:
            for part in word.replace("::", "/").split("/"):
                if "." in part or "-" in part:
                    middles.append(part.lower())
                    middle_words.append(at)
    own = np.fromiter(
        map(number_term, chain(wholes, middles), map(len, repeat(term_numbers))),
        dtype=np.int64, count=len(wholes) + len(middles),
    )
    # Word -> atoms -> terms, then the compounds' own terms; grouped by word.
    fan = atom_fans[atom_ids]
    starts = np.repeat(atom_bounds[:-1][atom_ids] - np.cumsum(fan) + fan, fan) + np.arange(int(fan.sum()))
    word_of = np.concatenate([np.repeat(atom_words, fan), whole_words, np.asarray(middle_words, dtype=np.int64)])
    unsorted = np.concatenate([atom_parts[starts], own])
    order = np.argsort(word_of, kind="stable")
    part_bounds = np.zeros(len(distinct) + 1, dtype=np.int64)
    np.cumsum(np.bincount(word_of, minlength=len(distinct)), out=part_bounds[1:])
    return list(term_numbers), part_bounds, unsorted[order]


def _separators_per_line(joined: str, lines: int) -> np.ndarray:
    """How many separators (``.``, ``/``, ``-``, ``::``) each of the newline-joined words holds."""
    if not lines:  # (words are never empty, so any line has characters)
        return np.zeros(0, dtype=np.int64)
    if joined.isascii():
        codes = np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
        weights = _SEPARATOR_WEIGHT_U8[codes]
    else:
        codes = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
        weights = _SEPARATOR_WEIGHT[np.minimum(codes, 127)]
    line_starts = np.zeros(lines, dtype=np.int64)
    line_starts[1:] = np.flatnonzero(codes == ord("\n")) + 1
    return np.add.reduceat(weights, line_starts) // 2


def _first_seen_ids(words: list[str]) -> tuple[np.ndarray, list[str]]:
    """Each word's number in order of first appearance, and the distinct words in that order.

    A dictionary in C (``map(dict.setdefault, ...)``) gives each word the position of its
    first occurrence (``itertools.count``); numpy turns those into 0, 1, 2... A counter of
    the dictionary's length (``map(len, repeat(d))``) gives them directly, at one more C call
    per word: a quarter slower on the standard library's batches."""
    first_at: dict[str, int] = {}
    positions = np.fromiter(map(first_at.setdefault, words, count()), dtype=np.int64, count=len(words))
    dense = np.empty(len(words), dtype=np.int64)
    dense[np.fromiter(first_at.values(), dtype=np.int64, count=len(first_at))] = np.arange(len(first_at))
    return dense[positions], list(first_at)


def count_terms(units: Sequence[Sequence[str]]) -> TermCounts:
    """Count the terms of each unit's texts, as ``tokenize`` would emit them.

    In C (``_compiled.c``) where it was built: the same counts, per unit, as
    ``count_terms_python`` (term ids may be numbered in another order), about ten times
    faster. Non-ASCII text and its words go through this module's own functions there too.
    """
    if compiled is None:
        return count_terms_python(units)
    terms, bounds, term_ids, tfs, lengths = compiled.count_terms(units, _words_of, _expand_word_whole)
    return TermCounts(
        terms,
        np.frombuffer(bounds, dtype=np.int64),
        np.frombuffer(term_ids, dtype=np.int32),
        np.frombuffer(tfs, dtype=np.int32),
        np.frombuffer(lengths, dtype=np.int64),
    )


def _words_of(text: str) -> list[str]:
    """The words of a non-ASCII text (``count_terms_python``'s, for the compiled counter)."""
    return _ANY_WORD.findall(unicodedata.normalize("NFKC", text))


def _expand_word_whole(word: str) -> tuple[str, ...]:
    """The terms of a word found by ``_ANY_WORD``: a CJK run's bigrams, or ``_word_terms``."""
    if CJK_CHAR.match(word):
        return tuple(_bigrams(word))
    return _word_terms(word)


def count_terms_python(units: Sequence[Sequence[str]]) -> TermCounts:
    """``count_terms`` in Python and numpy: the specification the compiled counter meets.

    Words are found by one regex per text (in C) and numbered by a dictionary in C
    (``map(dict.setdefault, ...)``); the distinct words are expanded into terms by
    ``_word_fans`` (a few passes in C over all of them, Python only for each distinct
    *atom*), and occurrences are counted with numpy sorts: no per-token Python work.
    """
    words: list[str] = []
    per_unit = np.zeros(len(units), dtype=np.int64)
    for u, texts in enumerate(units):
        before = len(words)
        for text in texts:
            if text.isascii():
                words += _ASCII_CHUNK.findall(text)
            else:
                words += _ANY_WORD.findall(unicodedata.normalize("NFKC", text))
        per_unit[u] = len(words) - before
    word_ids, distinct = _first_seen_ids(words)
    del words
    # Word w gives the terms parts[part_bounds[w]:part_bounds[w + 1]].
    terms, part_bounds, parts = _word_fans(distinct)
    n_words = max(len(distinct), 1)
    # (unit, word) occurrences and their counts.
    keys = np.repeat(np.arange(len(units), dtype=np.int64), per_unit) * n_words + word_ids
    keys, counts = np.unique(keys, return_counts=True)
    unit_of, word_of = np.divmod(keys, n_words)
    # Each (unit, word) pair becomes one (unit, term) pair per term of the word.
    fan = (part_bounds[1:] - part_bounds[:-1])[word_of]
    starts = np.repeat(part_bounds[:-1][word_of] - np.cumsum(fan) + fan, fan) + np.arange(int(fan.sum()))
    term_of = parts[starts]
    n_terms = max(len(terms), 1)
    pair_keys = np.repeat(unit_of, fan) * n_terms + term_of
    pair_counts = np.repeat(counts, fan)
    order = np.argsort(pair_keys, kind="stable")
    pair_keys, pair_counts = pair_keys[order], pair_counts[order]
    firsts = np.flatnonzero(np.diff(pair_keys, prepend=-1))
    tfs = np.add.reduceat(pair_counts, firsts) if len(firsts) else pair_counts[:0]
    unit_of_pair, term_ids = np.divmod(pair_keys[firsts], n_terms)
    bounds = np.searchsorted(unit_of_pair, np.arange(len(units) + 1))
    lengths = np.zeros(len(units), dtype=np.int64)
    np.add.at(lengths, unit_of_pair, tfs)
    return TermCounts(terms, bounds, term_ids.astype(np.int32), tfs.astype(np.int32), lengths)
