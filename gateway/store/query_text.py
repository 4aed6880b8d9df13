"""The lexical leg's query text: a natural question's content words, the same for every engine.

Agents ask questions ("how do I keep my password out of the config file?"). BM25 scores
every query word by its rarity in the corpus, so in a small or technical corpus a
question's own words (how, do, I, what, happens, if) can be rarer than its content words
and outweigh them, and the analyzers differ in which of them they drop (Elasticsearch's
``standard`` drops none, OpenSearch's ``english`` a few, Qdrant's sparse encoder its own
list). :func:`lexical_text` removes them before any engine sees the text, so every engine
ranks by the same words: only from a text that reads as a question (ends with ``?`` or
starts with a question word), and never down to nothing. Statements, keyword queries and
claims reach the engine unchanged. It runs where a store sets ``search.question_words:
drop``; the default is ``keep``, because on the demo's training questions the Qdrant
sparse encoder's own stopwords already leave the content words in charge and dropping
more did not rank better (docs/benchmarks.md).

The dense leg always embeds the caller's text as written: a sentence encoder reads the
whole question.
"""

from __future__ import annotations

import re
from typing import Final

QUESTION_STARTS: Final = frozenset(
    """
    how what why when where which who whom whose can could do does did is are was were
    will would should shall may might must am
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""A text starting with one of these reads as a question, with or without its ``?``."""

QUESTION_WORDS: Final = frozenset(
    """
    how what why when where which who whom whose
    do does did doing done can could should would will shall may might must
    is are was were am be been being
    i me my mine myself we us our you your it its they them their there here
    this that these those a an the of to in on at for from by with about as into
    and or so if then
    happen happens happened happening please possible way ways
    want wanted need needs tell know mean means thing things
    anything something somehow actually really just also ever else
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""Question words and filler: the words that carry no topic in a question."""

_WORD: Final = re.compile(r"[^\W_]+(?:'[^\W_]+)?")


def is_question(text: str) -> bool:
    """True when ``text`` reads as a question: it ends with ``?`` or opens with a question word."""
    stripped = text.strip()
    if stripped.endswith("?"):
        return True
    first = _WORD.search(stripped)
    return first is not None and first.group(0).lower() in QUESTION_STARTS


def lexical_text(text: str) -> str:
    """The words of ``text`` the lexical leg ranks by.

    A question loses its question words and filler (:data:`QUESTION_WORDS`); anything
    else is returned unchanged, as is a question made only of such words.
    """
    if not is_question(text):
        return text
    kept = [w for w in _WORD.findall(text) if w.lower() not in QUESTION_WORDS]
    return " ".join(kept) if kept else text
