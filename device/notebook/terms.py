"""Words as the Notebook search compares them: folded, stripped, stemmed.

A query and a note meet on the stem of each word, so "work", "works",
"working" and "worked" are one term, as are "café", "Cafe" and "CAFÉ". The
same steps run on both sides:

1. case folding (``str.casefold``: "Straße" becomes "strasse");
2. compatibility decomposition (NFKD) with the combining marks dropped, so
   accents go and "ﬁ" becomes "fi";
3. splitting into runs of letters and digits;
4. on the query only, dropping English stopwords (a query made of nothing
   else is kept whole, so "who is it" still searches for something);
5. the English Snowball stemmer.

The stemmer is not thread-safe, so each thread keeps its own; stems are
cached, because a Notebook's vocabulary repeats the same few thousand words.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from functools import lru_cache
from typing import Any

import snowballstemmer  # type: ignore[import-untyped]

MAX_QUERY_TERMS = 16

# Words that carry the asking but not the subject of a question. The common
# English function words, and a few verbs and pronouns that plain questions
# ("can you tell me what Priya said about...") wrap around their subject.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any anything are as at
    be because been before being below between both but by
    can could did do does doing down during each either
    few for from further get got had has have having he her here hers herself
    him himself his how i if in into is it its itself just know let
    me more most my myself no nor not now of off on once only or other ought
    our ours ourselves out over own please remember remind s same say said
    she should so some something t tell than that the their theirs them
    themselves then there these they thing things this those through to too
    under until up very was we were what when where which while who whom why
    will with would you your yours yourself yourselves
    """.split()
)

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_local = threading.local()


def fold(text: str) -> str:
    """Case-folded, compatibility-decomposed, with the combining marks dropped."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def words(text: str) -> list[str]:
    """The folded words of ``text``, in order, repeats kept."""
    return _WORD.findall(fold(text))


def _stemmer() -> Any:
    found: Any = getattr(_local, "stemmer", None)
    if found is None:
        found = _local.stemmer = snowballstemmer.stemmer("english")
    return found


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """The English Snowball stem of one folded word."""
    stemmed: str = _stemmer().stemWord(word)
    return stemmed


def stems(text: str) -> set[str]:
    """Every stem in ``text``: what a note's field offers a query term."""
    return {stem(w) for w in words(text)}


@lru_cache(maxsize=1 << 16)
def token_stems(token: str) -> frozenset[str]:
    """The stems of one index token (usually one; a token that decomposes
    into several words, such as "½", gives each)."""
    return frozenset(stem(w) for w in words(token))


def query_words(query: str) -> list[str]:
    """The query's folded words, each once, stopwords dropped unless that
    leaves nothing; at most `MAX_QUERY_TERMS`."""
    found = list(dict.fromkeys(words(query)))
    meaningful = [w for w in found if w not in STOPWORDS]
    return (meaningful or found)[:MAX_QUERY_TERMS]


def query_terms(query: str) -> list[str]:
    """The stems a query searches for, each once, in the order written."""
    return list(dict.fromkeys(stem(w) for w in query_words(query)))
