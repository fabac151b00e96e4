"""Tokenising for the lexical index: words, identifiers and paths, Snowball-stemmed.

Code memories mix prose with identifiers (``SpecStore``, ``max_item_bytes``) and paths
(``src/graphmem/index/db.py``), so a token is emitted whole *and* split into its parts: a query
for the exact path and a query for one of its words both match.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache

_WORD = re.compile(r"[\w./\\'’-]+", re.UNICODE)
_PATHISH = re.compile(r"[\w.-]*[./\\][\w./\\-]*\w")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_SPLIT = re.compile(r"[^\w]+|_")

STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves s t don ll m re ve d also yes yeah oh hey hi
""".split())

MONTHS = ("january february march april may june july august september october november "
          "december").split()


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer  # PyStemmer: Snowball in C, ~1 µs per word

    return Stemmer.Stemmer("english")


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _stemmer().stemWord(word)


def _parts(token: str) -> list[str]:
    """A token's words: ``SpecStore`` -> spec, store; ``db.py`` -> db, py."""
    out: list[str] = []
    for piece in _SPLIT.split(token):
        if piece:
            out.extend(m.group(0) for m in _CAMEL.finditer(piece))
    return out


def tokenize(text: str) -> list[str]:
    """Index terms of ``text``: stemmed words without stop words, plus whole paths/identifiers."""
    terms: list[str] = []
    for m in _WORD.finditer(text):
        raw = m.group(0).replace("’", "'").strip(".-/\\'")
        if "'" in raw and not _PATHISH.search(raw):
            raw = raw.split("'")[0]  # Caroline's -> Caroline, don't -> don
        if not raw:
            continue
        low = raw.lower()
        parts = _parts(raw)
        whole = len(parts) > 1 or _PATHISH.fullmatch(raw) is not None
        if whole:
            terms.append(low)  # the exact identifier or path, unstemmed
            base = re.split(r"[/\\]", low)[-1]
            if base != low and base:
                terms.append(base)  # a file's name on its own
        for p in parts if whole else [low]:
            p = p.lower()
            if p and p not in STOPWORDS and (len(p) > 1 or p.isdigit()):
                terms.append(_stem(p))
    return terms


@lru_cache(maxsize=4096)
def term_set(text: str) -> frozenset[str]:
    """The distinct terms of ``text``, remembered for the texts asked last (a context checks
    each quoted turn's words against the task's; the same turns come back task after task)."""
    return frozenset(tokenize(text))


def date_terms(when: datetime | None) -> list[str]:
    """A time as words a question might use: its month name and year."""
    if when is None:
        return []
    return [_stem(MONTHS[when.month - 1]), str(when.year)]
