"""Meaning vectors for notes: a small static embedding model, fully offline.

Word search meets a note only on shared stems, so "gift ideas for Maria" never
finds "she'd love that teal teapot". This module turns a text into a vector
whose direction carries some of its meaning, so that notes can be ranked by
how close they sit to a question.

Why a static model
------------------
The model is WordLlama's ``l2_supercat`` at 256 dimensions: one learned vector
per token of the Llama 2 vocabulary (32,000 of them), and a text's vector is
the average of its tokens' vectors. There is no network, no attention and no
GPU; embedding is a tokenizer pass and a table look-up: some twenty-five
thousand 300-character notes a second on a two-core machine once their words
have been seen (each distinct word is tokenized once a process: see
`_token_ids`), some fifteen thousand when none has, and a query in well under
a millisecond. The table (16 MB of float16) and the tokenizer's configuration
ship inside the ``wordllama`` wheel from PyPI, and are read straight from the
installed package: nothing is fetched, cached or written at run time, which is
what a local-first memory needs.

This module reads those two files itself (with ``safetensors``, ``tokenizers``
and numpy) and never imports the ``wordllama`` package: its own loader looks
for the tokenizer file in a folder the wheel does not have and falls back to
downloading it, and importing it configures the root logger, which would
repeat every ``pixie`` log line on stderr. The average computed here is the
one ``WordLlamaInference.embed`` computes (no special tokens, mean over the
tokens): on the same text the two agree to within float16 rounding.

The cost: an average of word vectors has no word order and no negation ("not
ill" sits beside "ill"); names and surface words weigh heavily, so two notes
that share a name can outrank the note that answers the question; related
texts that share no words score low in absolute terms (a few hundredths), so
a score is only good for ranking, never as a threshold; the vocabulary is
English-centred. The first use in a process costs about 0.1-0.2 s and some
70 MB of memory (the libraries, and the table held as float32 so that sums
need no conversion); a stored vector costs 512 bytes (``DIM`` float16
values, little-endian). A text is embedded from its first `MAX_CHARS`
characters: the first thousand of a note carry its subject, and the
tokenizer's time grows with the length.

Sealed notes
------------
A sealed note must never be embedded: its vector leaks its meaning (nearest
neighbours, clustering and probing all recover what it is about) even though
its text stays sealed. Keeping sealed text away from this module is the
callers' duty, as it is for every clear-zone index; this module only computes.

Threads: the model is loaded once per process behind a lock, and is read-only
afterwards, so callers may embed from a worker thread. Nothing heavy (numpy,
the tokenizer, the table) is imported until the first call that needs it, so
importing this module costs a command's start-up nothing.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from pixie.device.errors import DeviceError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from tokenizers import Tokenizer

DIM: Final[int] = 256
"""Values per vector."""

MODEL_NAME: Final[str] = "wordllama-l2_supercat-256-mean-f16"
"""What made a vector, and how it is packed. Vectors made under another name
are not comparable with these: store the name beside them and re-embed when it
changes."""

VECTOR_BYTES: Final[int] = DIM * 2
"""Length of one packed vector (float16)."""

MAX_CHARS: Final[int] = 1000
"""A text is cut to this many characters before it is embedded."""

BATCH: Final[int] = 256
"""Texts per tokenizer call in `embed`."""

_PACKAGE: Final = "wordllama"
_WEIGHTS: Final = ("weights", "l2_supercat_256.safetensors")
_TOKENIZER: Final = ("tokenizers", "l2_supercat_tokenizer_config.json")
_TENSOR: Final = "embedding.weight"
_LIBRARIES: Final = ("numpy", "safetensors", "tokenizers")
_PACKED: Final = "<f2"
_WORD_MARK: Final = "\u2581"  # "▁": SentencePiece's mark of a word's start
_NOT_WORDWISE: Final = re.compile("[<\u2581]")
WORD_CACHE: Final[int] = 100_000
"""Words whose token ids are kept per process (some 25 MB when full; a
life's own words are a few tens of thousands). When a batch would pass it
the cache starts over with that batch's words."""


class MeaningUnavailable(DeviceError):
    """The embedding model's libraries or files are not installed, or are damaged."""


class _Model:
    __slots__ = ("lock", "table", "tokenizer", "words", "wordwise")

    def __init__(self, table: npt.NDArray[np.float32], tokenizer: Tokenizer) -> None:
        self.table = table
        self.tokenizer = tokenizer
        # Whether a text's tokens are its words' tokens end to end (see
        # `_token_ids`): true when no token of the vocabulary holds the word
        # mark "▁" anywhere but at its start (runs of it aside), so that no
        # merge can join the end of one word to the next.
        self.wordwise = not any(
            _WORD_MARK in token[1:] and token.strip(_WORD_MARK)
            for token in tokenizer.get_vocab(with_added_tokens=True)
        )
        self.words: dict[str, list[int]] = {}  # a word's token ids
        self.lock = threading.Lock()  # over `words`


_lock = threading.Lock()
_loaded: _Model | None = None


def _model_files() -> tuple[Path, Path] | None:
    """The table and tokenizer files inside the installed wheel, without importing it."""
    try:
        spec = importlib.util.find_spec(_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        root = Path(location)
        weights, tokenizer = root.joinpath(*_WEIGHTS), root.joinpath(*_TOKENIZER)
        if weights.is_file() and tokenizer.is_file():
            return weights, tokenizer
    return None


def available() -> bool:
    """Whether the model can be loaded: its libraries import and its files are there.

    Never raises. Imports the libraries (a tenth of a second the first time) but
    does not read the table.
    """
    try:
        for name in _LIBRARIES:
            importlib.import_module(name)
        return _model_files() is not None
    except Exception:  # a broken install is "not available", whatever it raises
        return False


def _load() -> _Model:
    try:
        from safetensors import safe_open
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise MeaningUnavailable(f"the embedding libraries are not installed ({exc})") from exc
    files = _model_files()
    if files is None:
        raise MeaningUnavailable(f"the {_PACKAGE} package and its {DIM}-d model are not installed")
    weights, tokenizer_file = files
    try:
        with safe_open(str(weights), framework="np") as tensors:
            table = tensors.get_tensor(_TENSOR)
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
    except Exception as exc:  # the libraries raise plain Exception on bad files
        raise MeaningUnavailable(f"the embedding model could not be read ({exc})") from exc
    if table.ndim != 2 or table.shape[1] != DIM or table.dtype.name != "float16":
        raise MeaningUnavailable(f"unexpected embedding table {table.dtype}{table.shape}")
    if tokenizer.get_vocab_size(with_added_tokens=True) > table.shape[0]:
        raise MeaningUnavailable("the tokenizer's vocabulary is larger than the embedding table")
    # One text is one sequence: no padding to a batch's longest, no cut at a token count.
    tokenizer.no_padding()
    tokenizer.no_truncation()
    # Held as float32 (32 MB rather than 16): summing a text's token vectors
    # then needs no conversion per token, which took a third of the time.
    wide = table.astype("float32")
    wide.flags.writeable = False
    return _Model(wide, tokenizer)


_last_used = 0.0  # time.monotonic() of the last call that needed the model


def _model() -> _Model:
    global _loaded, _last_used  # noqa: PLW0603 - the once-per-process cache
    _last_used = time.monotonic()
    model = _loaded
    if model is None:
        with _lock:
            if _loaded is None:
                _loaded = _load()
            model = _loaded
    return model


def release_if_idle(now: float, idle: float) -> bool:
    """Let go of the model (its table, tokenizer and word cache: some 70 MB)
    if it is loaded and no call has needed it for ``idle`` seconds before
    ``now`` (on `time.monotonic`'s clock); the next call loads it again, in a
    tenth or two of a second. A long-running process (`pixie run`) calls this
    now and then, so that it does not hold the model between the rare
    moments it embeds. Returns whether it let go."""
    global _loaded, _preloading  # noqa: PLW0603 - the once-per-process cache
    with _lock:
        if _loaded is None or now - _last_used < idle:
            return False
        with _preload_lock:
            if _preloading is not None and _preloading.is_alive():
                return False  # a load is under way: it is about to be used
            _preloading = None
        _loaded = None  # an embed under way keeps its own reference until it ends
    return True


_preloading: threading.Thread | None = None
_preload_lock = threading.Lock()


def preload() -> None:
    """Start loading the model on a thread of its own, if it is not loaded
    yet, and return at once; the first `embed` then waits for it (or loads
    it itself). A caller that will embed after other work (a distillation
    pass embeds its notes at its end) calls this first, so that the load
    happens while that work waits: on a model's answers over HTTP, it comes
    free. (Beside the built-in distiller, which keeps the interpreter busy,
    it gains nothing measurable and costs nothing either.) A model that
    cannot load is left for `embed` to report; this never raises."""
    global _preloading  # noqa: PLW0603 - once per process
    # Its own lock: `_lock` is held for the whole of a load, and this must
    # not wait for one (it is called from an event loop).
    with _preload_lock:
        if _loaded is not None or _preloading is not None:
            return
        _preloading = threading.Thread(target=_quietly_load, name="pixie-meaning-load", daemon=True)
        _preloading.start()


def _quietly_load() -> None:
    # Whatever stops the load is reported by the embed that needs the model.
    with contextlib.suppress(Exception):
        _model()


def _prepare(text: str) -> str:
    """Cut to `MAX_CHARS`, then fold runs of whitespace to one space.

    Newlines and repeated spaces are tokens of their own in this vocabulary
    (byte and space pieces), which would pull every multi-line note towards the
    others; the words are what carry the meaning.
    """
    return " ".join(text[:MAX_CHARS].split())


def embed(texts: Sequence[str]) -> list[bytes]:
    """One packed, L2-normalised float16 vector (`VECTOR_BYTES` bytes) per text.

    An empty or whitespace-only text gives the zero vector, which is similar to
    nothing. Each text's vector depends on that text alone, so the same text
    gives the same bytes however it is batched. Raises `MeaningUnavailable` if
    the model is not installed.
    """
    if isinstance(texts, str):
        raise TypeError("embed takes a sequence of texts; use embed_query for one")
    model = _model()
    import numpy as np

    prepared = [_prepare(text) for text in texts]
    vectors = np.zeros((len(prepared), DIM), dtype=np.float32)
    todo = [i for i, text in enumerate(prepared) if text]
    for start in range(0, len(todo), BATCH):
        rows = todo[start : start + BATCH]
        for row, ids in zip(rows, _token_ids(model, [prepared[i] for i in rows]), strict=True):
            if ids:
                vectors[row] = model.table[ids].sum(axis=0) / len(ids)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    np.divide(vectors, norms, out=vectors, where=norms > 0)
    packed = vectors.astype(_PACKED)
    return [row.tobytes() for row in packed]


def _token_ids(model: _Model, texts: list[str]) -> list[list[int]]:
    """Each text's token ids, as the tokenizer gives them for the whole text.

    A text here is words one space apart (`_prepare`). When the vocabulary
    lets no token span two words (``model.wordwise``), a text's tokens are
    its words' tokens end to end, so each distinct word is tokenized once a
    process and looked up after: a personal memory repeats the same few
    thousand words, and a dictionary look-up costs a fraction of the
    tokenizer's pass over the text. Otherwise every text goes through the
    tokenizer (the fast form: no character offsets, which nothing reads).
    """
    # A text holding the word mark itself, or what may be a special token
    # ("<s>", which the tokenizer matches before it marks words), goes
    # through the tokenizer whole.
    whole = [i for i, text in enumerate(texts) if not model.wordwise or _NOT_WORDWISE.search(text)]
    out: list[list[int]] = [[] for _ in texts]
    if whole:
        encodings = model.tokenizer.encode_batch_fast(
            [texts[i] for i in whole], add_special_tokens=False
        )
        for i, encoding in zip(whole, encodings, strict=True):
            out[i] = encoding.ids
    aside = set(whole)
    rest = [i for i in range(len(texts)) if i not in aside]
    if not rest:
        return out
    split = {i: texts[i].split(" ") for i in rest}
    with model.lock:
        words = model.words
        missing = list({w for ws in split.values() for w in ws if w not in words})
        if len(words) + len(missing) > WORD_CACHE:
            # Start over: the cache then holds this batch's words alone (it
            # may pass WORD_CACHE by one batch's worth).
            words.clear()
            missing = list({w for ws in split.values() for w in ws})
        if missing:
            encodings = model.tokenizer.encode_batch_fast(missing, add_special_tokens=False)
            for word, encoding in zip(missing, encodings, strict=True):
                words[word] = encoding.ids
        for i, ws in split.items():
            out[i] = [t for w in ws for t in words[w]]
    return out


def embed_query(text: str) -> bytes | None:
    """The packed vector of one query, or None if it has nothing to embed (blank).

    Raises `MeaningUnavailable` if the model is not installed.
    """
    if not _prepare(text):
        return None
    vector = embed([text])[0]
    return None if not any(vector) else vector


def unpack(packed: bytes) -> npt.NDArray[np.float32]:
    """Packed vectors (one or several, end to end) as rows of float32."""
    import numpy as np

    return np.frombuffer(packed, dtype=_PACKED).astype(np.float32).reshape(-1, DIM)


def _check(vector: bytes, what: str) -> None:
    if len(vector) != VECTOR_BYTES:
        raise ValueError(f"{what} is {len(vector)} bytes, not {VECTOR_BYTES} ({MODEL_NAME})")


def similarities(query: bytes, vectors: Sequence[bytes]) -> list[float]:
    """Cosine similarity of the query to each vector, in order, in [-1, 1].

    The vectors are normalised when made, so this is their dot product; a zero
    vector scores 0. A vector of the wrong length raises ValueError. Needs
    numpy but not the model.
    """
    _check(query, "the query vector")
    for index, vector in enumerate(vectors):
        _check(vector, f"vector {index}")
    if not vectors:
        return []
    try:
        import numpy as np
    except ImportError as exc:
        raise MeaningUnavailable(f"numpy is not installed ({exc})") from exc

    scores = unpack(b"".join(vectors)) @ unpack(query)[0]
    np.clip(scores, -1.0, 1.0, out=scores)
    return [float(score) for score in scores]
