"""A lexical sparse encoder for Qdrant: BM25 without downloading anything.

It lives with the Qdrant connector, which encodes a lexical query's text itself
(Lucene engines analyse text natively; only Qdrant needs this), and with the
collection check that requires the IDF modifier it relies on. Indexers (the
embedded demo, test corpora) import it to write the matching document vectors.

Qdrant ranks sparse vectors by dot product; with the collection's sparse
vector configured with ``modifier: idf`` it multiplies each query weight by
the term's inverse document frequency, computed by the engine over the
collection. So documents carry BM25's term-frequency saturation and queries
carry 1 per unique term, and the engine's score is BM25:

    score(q, d) = sum over t in q of idf(t) * tf(t,d)*(k1+1) / (tf(t,d) + k1*(1-b+b*|d|/avgdl))

Two analyzers turn text into terms; a collection must be queried with the one it was
indexed with (``search.sparse_analyzer``), since a term that stems differently simply
misses:

* ``light`` (the default, unchanged since the first release): stopwords and a light
  suffix stemmer for plurals and inflections;
* ``english``: the same, plus British/American spelling conflation (``normalise``,
  ``normalisation``, ``normalize`` -> ``normaliz``; ``behaviour`` -> ``behavior``;
  ``analyse`` -> ``analyze``) and a few of Porter's derivational rules (``-ation`` ->
  ``-ate``, ``-ate`` and ``-er`` dropped from long stems, so ``configure`` and
  ``configuration``, ``embed`` and ``embedders`` meet). The embedded demo uses it.

Terms are hashed to indices with CRC-32, which is stable across processes,
machines and Python versions (``hash()`` is salted per process), so a corpus
indexed by one process is queried by another. Collisions merge two terms'
weights; with 2**32 buckets they are rare enough not to matter for ranking.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Iterable
from typing import Literal

from connectors.base import SparseVector

_TOKEN = re.compile(r"[^\W_]+")
"""Unicode letters and digits; underscores and punctuation split tokens."""

# A short English list (close to Lucene's and the classic SMART core): long
# lists hurt recall on scientific text, where words like "not" and "no" matter
# less than their neighbours but "cannot" etc. carry little.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been
    before being below between both but by can could did do does doing down during
    each few for from further had has have having he her here hers herself him
    himself his how i if in into is it its itself just me more most my myself nor
    of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this
    those through to too under until up very was we were what when where which while
    who whom why will with would you your yours yourself yourselves
    """.split()  # noqa: SIM905 - a word list reads better as text
)

Analyzer = Literal["light", "english"]

_KEEP_S = ("ss", "us", "is")
_NO_UNDOUBLE = frozenset("lsz")


def _has_vowel(s: str) -> bool:
    return any(c in "aeiouy" for c in s)


def stem(word: str) -> str:
    """A light English suffix stemmer (a small subset of Porter's rules): the ``light`` analyzer.

    Enough to conflate plurals and common inflections (``mutations``,
    ``mutated``, ``mutating`` -> ``mutat``); words with digits and short words
    are left alone. Deterministic and dependency-free.
    """
    return _stem(word, english=False)


def stem_english(word: str) -> str:
    """The ``english`` analyzer's stemmer: :func:`stem` plus spelling conflation and a few
    derivational rules (see the module docstring)."""
    return _stem(word, english=True)


_BRITISH = re.compile(r"(?<=...)is(e|es|ed|ing|ation|ations|er|ers)$")
"""normalise, normalised, normalisation... -> the -ize spelling (needs a 3-letter base)."""
_BRITISH_YSE = re.compile(r"(?<=..)ys(e|es|ed|ing)$")
"""analyse, paralysed -> analyze, paralyzed."""


def _measure(s: str) -> int:
    """Porter's m: how many vowel-consonant sequences the stem has (``embedd`` is 2)."""
    m, prev_vowel = 0, False
    for c in s:
        vowel = c in "aeiouy"
        if prev_vowel and not vowel:
            m += 1
        prev_vowel = vowel
    return m


def _stem(word: str, english: bool) -> str:
    if len(word) <= 3 or not word.isalpha():
        return word
    w = word
    if english:
        w = _BRITISH.sub(r"iz\1", w)
        w = _BRITISH_YSE.sub(r"yz\1", w)
        if len(w) >= 6 and w.endswith("our"):
            w = w[:-2] + "r"  # behaviour -> behavior, colour -> color
    # Plurals and third person.
    if w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("s") and not w.endswith(_KEEP_S):
        w = w[:-1]
    # Inflections: -ied, -ingly, -edly, -ing, -ed, -ly.
    if w.endswith("ied") and len(w) > 4:
        w = w[:-3] + "y"
    else:
        for suffix in ("ingly", "edly", "ing", "ed", "ly"):
            base = w[: -len(suffix)]
            own_ed = base.endswith("e") or (len(base) == 3 and base[-1] != base[-2])
            if english and suffix == "ed" and w.endswith("ed") and own_ed:
                break  # speed, proceed, embed: the -ed is the word's own (added is not)
            if w.endswith(suffix) and len(base) >= 3 and _has_vowel(base):
                w = base
                # running -> runn -> run, but called -> call, added -> add.
                if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in _NO_UNDOUBLE:
                    w = w[:-1]
                elif english and w.endswith(("at", "iz")) and suffix not in ("ly",):
                    w += "e"  # activated -> activat -> activate, as activate itself
                break
    # A few derivational suffixes, only when a real stem remains.
    for suffix in ("ness", "ment"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 4:
            w = w[: -len(suffix)]
            break
    if english and w.endswith("ization"):
        w = w[:-5] + "e"  # normalization -> normalize
    elif english and w.endswith("ation") and len(w) >= 8:
        w = w[:-3] + "e"  # configuration -> configurate
    elif w.endswith(("sion", "tion")) and len(w) - 3 >= 4:
        w = w[:-3]  # infection -> infect, expression -> express
    if english:
        if w.endswith("ate") and _measure(w[:-3]) > 1:
            w = w[:-3]  # configurate -> configur, validate -> valid
        elif w.endswith("er") and _measure(w[:-2]) > 1:
            w = w[:-2]  # embedder -> embedd, consumer -> consum; server stays
            if w[-1] == w[-2] and w[-1] not in _NO_UNDOUBLE:
                w = w[:-1]
    if w.endswith("e") and len(w) > 4:
        w = w[:-1]  # activate / activated / activating -> activat
    return w


def term_index(term: str) -> int:
    """The sparse index of a term: CRC-32 of its UTF-8 bytes (fits Qdrant's u32)."""
    return zlib.crc32(term.encode("utf-8"))


class LexicalSparseEncoder:
    """Turns text into sparse vectors for a Qdrant sparse vector with the IDF modifier.

    ``k1`` and ``b`` are BM25's usual parameters; ``avgdl`` is the corpus's
    average document length in tokens (after stopword removal), as returned by
    :meth:`average_length`. Queries do not depend on any of them, so a query
    encoder may be built with the defaults.
    """

    def __init__(
        self,
        k1: float = 1.2,
        b: float = 0.75,
        avgdl: float = 100.0,
        analyzer: Analyzer = "light",
    ) -> None:
        if k1 < 0 or not 0 <= b <= 1 or avgdl <= 0:
            raise ValueError("LexicalSparseEncoder needs k1 >= 0, 0 <= b <= 1 and avgdl > 0")
        self.k1 = k1
        self.b = b
        self.avgdl = avgdl
        self.analyzer: Analyzer = analyzer

    @staticmethod
    def terms(text: str, analyzer: Analyzer = "light") -> list[str]:
        """Lowercased, stopword-free, stemmed terms of text, in order."""
        english = analyzer == "english"
        return [_stem(t, english) for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]

    @classmethod
    def average_length(cls, texts: Iterable[str], analyzer: Analyzer = "light") -> float:
        """Average number of terms per text: the ``avgdl`` to build a document encoder with."""
        total = count = 0
        for text in texts:
            total += len(cls.terms(text, analyzer))
            count += 1
        return total / count if count and total else 1.0

    def encode_document(self, text: str) -> SparseVector:
        """BM25-saturated term frequencies; the engine supplies idf at query time."""
        terms = self.terms(text, self.analyzer)
        norm = self.k1 * (1 - self.b + self.b * len(terms) / self.avgdl)
        weights = {t: tf * (self.k1 + 1) / (tf + norm) for t, tf in Counter(terms).items()}
        return _to_sparse(weights)

    def encode_query(self, text: str) -> SparseVector:
        """Weight 1 per unique term; empty when the text has no term (e.g. only stopwords)."""
        return _to_sparse(dict.fromkeys(self.terms(text, self.analyzer), 1.0))


def _to_sparse(weights: dict[str, float]) -> SparseVector:
    merged: dict[int, float] = {}
    for term, weight in weights.items():
        idx = term_index(term)
        merged[idx] = merged.get(idx, 0.0) + weight  # a hash collision adds up, never drops
    indices = sorted(merged)
    return SparseVector(indices=tuple(indices), values=tuple(merged[i] for i in indices))
