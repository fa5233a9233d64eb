"""Meaning vectors: their shape and packing, blank text, determinism and
batching, the wrong length refused, a few meaning pairs ranked the right way
round, and the promises about start-up and the network (nothing heavy at
import, nothing fetched or written when the model loads, the wordllama
package itself never imported)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pixie.device.notebook import meaning

needs_model = pytest.mark.skipif(
    not meaning.available(),
    reason="the embedding model is not installed (pip install wordllama: numpy, "
    "safetensors, tokenizers and the l2_supercat_256 table in its wheel)",
)


def _values(vector: bytes) -> list[float]:
    import numpy as np

    return [float(x) for x in np.frombuffer(vector, dtype="<f2")]


def _run(code: str, *, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


# -- start-up --------------------------------------------------------------------------


def test_importing_the_module_loads_nothing_heavy() -> None:
    out = _run(
        """
        import json, sys
        import pixie.device.notebook.meaning
        heavy = ["numpy", "tokenizers", "safetensors", "wordllama"]
        print(json.dumps({name: sys.modules.get(name) is not None for name in heavy}))
        """
    )
    assert json.loads(out) == {
        "numpy": False,
        "tokenizers": False,
        "safetensors": False,
        "wordllama": False,
    }


def test_the_constants() -> None:
    assert meaning.DIM == 256
    assert meaning.VECTOR_BYTES == 2 * meaning.DIM
    assert "256" in meaning.MODEL_NAME


def test_without_the_libraries_it_is_unavailable_and_says_so() -> None:
    out = _run(
        """
        import sys
        sys.modules["tokenizers"] = None  # makes `import tokenizers` fail
        from pixie.device.notebook import meaning
        print(meaning.available())
        try:
            meaning.embed(["hello"])
        except meaning.MeaningUnavailable as exc:
            print("unavailable:", exc)
        """
    )
    first, second = out.splitlines()
    assert first == "False"
    assert second.startswith("unavailable:")


def test_a_missing_model_package_is_unavailable_not_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(meaning, "_PACKAGE", "pixie_no_such_model_package")
    assert meaning._model_files() is None
    assert meaning.available() is False


@needs_model
def test_loading_reaches_no_network_writes_no_cache_and_leaves_logging_alone(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    out = _run(
        """
        import json, logging, socket, sys
        attempts = []
        def refuse(*args, **kwargs):
            attempts.append(repr(args)[:80])
            raise OSError("no network in this test")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.getaddrinfo = refuse
        socket.create_connection = refuse
        handlers = list(logging.getLogger().handlers)
        from pixie.device.notebook import meaning
        vectors = meaning.embed(["Priya moved to Bristol", "the boiler needs servicing"])
        print(json.dumps({
            "attempts": attempts,
            "lengths": [len(v) for v in vectors],
            "wordllama imported": "wordllama" in sys.modules,
            "root handlers unchanged": logging.getLogger().handlers == handlers,
        }))
        """,
        env=env,
    )
    assert json.loads(out) == {
        "attempts": [],
        "lengths": [meaning.VECTOR_BYTES] * 2,
        "wordllama imported": False,
        "root handlers unchanged": True,
    }
    assert list(home.iterdir()) == []  # no ~/.cache/wordllama or anything else


# -- the vectors -----------------------------------------------------------------------


@needs_model
def test_a_vector_has_dim_float16_values_and_unit_length() -> None:
    [vector] = meaning.embed(["Maria mentioned she'd love a teal teapot for her birthday."])
    assert len(vector) == meaning.VECTOR_BYTES
    values = _values(vector)
    assert len(values) == meaning.DIM
    assert math.sqrt(sum(x * x for x in values)) == pytest.approx(1.0, abs=2e-3)
    assert meaning.similarities(vector, [vector]) == [pytest.approx(1.0, abs=2e-3)]


@needs_model
@pytest.mark.parametrize("blank", ["", " ", "\n\t  \n"])
def test_blank_text_is_the_zero_vector_and_similar_to_nothing(blank: str) -> None:
    [zero, other] = meaning.embed([blank, "the boiler needs servicing"])
    assert zero == bytes(meaning.VECTOR_BYTES)
    assert meaning.similarities(other, [zero]) == [0.0]
    assert meaning.similarities(zero, [other, zero]) == [0.0, 0.0]
    assert meaning.embed_query(blank) is None


@needs_model
def test_no_texts_no_vectors() -> None:
    assert meaning.embed([]) == []
    query = meaning.embed_query("anything")
    assert query is not None
    assert meaning.similarities(query, []) == []


@needs_model
def test_same_text_same_bytes() -> None:
    text = "Dentist on Thursday at 3pm; bring the referral letter."
    first = meaning.embed([text])[0]
    assert meaning.embed([text])[0] == first
    assert meaning.embed_query(text) == first
    assert meaning.embed([text, text]) == [first, first]


@needs_model
def test_the_same_text_gives_the_same_bytes_in_another_process() -> None:
    text = "Priya moved to Bristol in March."
    out = _run(
        f"""
        from pixie.device.notebook import meaning
        print(meaning.embed([{text!r}])[0].hex())
        """
    )
    assert bytes.fromhex(out.strip()) == meaning.embed([text])[0]


@needs_model
def test_batched_equals_one_at_a_time() -> None:
    texts = [
        "gift ideas for Maria",
        "",
        "she'd love that teal teapot",
        "the boiler needs servicing " * 40,
        "I've had a temperature since Tuesday",
        "Priya moved to Bristol",
        "   ",
        "A much longer note about the garden: the tomatoes need staking, the "
        "courgettes are taking over, and the shed door has come off its hinge again.",
    ] * 40  # more than one tokenizer batch
    assert len(texts) > meaning.BATCH
    batched = meaning.embed(texts)
    assert batched == [meaning.embed([text])[0] for text in texts]


@needs_model
def test_text_is_cut_to_max_chars() -> None:
    head = ("the shed door has come off its hinge again " * 100)[: meaning.MAX_CHARS]
    assert len(head) == meaning.MAX_CHARS
    [cut, longer] = meaning.embed([head, head + " and a tail about something else entirely"])
    assert cut == longer


@needs_model
def test_whitespace_runs_do_not_change_the_vector() -> None:
    [plain, spaced] = meaning.embed(
        ["the boiler needs servicing", "  the boiler\n\nneeds   servicing\n"]
    )
    assert plain == spaced


def test_a_sequence_of_texts_not_a_string() -> None:
    with pytest.raises(TypeError):
        meaning.embed("one text")


# -- similarities ----------------------------------------------------------------------


def test_a_vector_of_the_wrong_length_is_refused() -> None:
    good = bytes(meaning.VECTOR_BYTES)
    with pytest.raises(ValueError, match="vector 1"):
        meaning.similarities(good, [good, good[:-2], good])
    with pytest.raises(ValueError, match="vector 0"):
        meaning.similarities(good, [good + b"\0\0"])
    with pytest.raises(ValueError, match="query"):
        meaning.similarities(good[:10], [good])
    with pytest.raises(ValueError, match="query"):
        meaning.similarities(b"", [])


def test_similarities_are_dot_products_of_the_packed_vectors() -> None:
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(3)
    raw = rng.normal(size=(5, meaning.DIM)).astype(np.float32)
    raw /= np.linalg.norm(raw, axis=1, keepdims=True)
    packed = [row.astype("<f2").tobytes() for row in raw]
    scores = meaning.similarities(packed[0], packed)
    halves = raw.astype(np.float16).astype(np.float32)
    expected = np.clip(halves @ halves[0], -1.0, 1.0)  # clipped: rounding can pass 1
    assert scores == pytest.approx(expected.tolist(), abs=1e-5)
    assert scores[0] == pytest.approx(1.0, abs=2e-3)
    assert all(-1.0 <= s <= 1.0 for s in scores)


# -- meaning ---------------------------------------------------------------------------

STATEMENTS = [
    "she'd love that teal teapot",
    "the boiler needs servicing",
    "I've had a temperature since Tuesday",
    "Priya moved to Bristol",
]


@needs_model
@pytest.mark.parametrize(
    ("query", "related"),
    [
        ("gift ideas for Maria", "she'd love that teal teapot"),
        ("feeling unwell", "I've had a temperature since Tuesday"),
        ("where does Priya live now", "Priya moved to Bristol"),
    ],
)
def test_the_related_statement_ranks_first(query: str, related: str) -> None:
    query_vector = meaning.embed_query(query)
    assert query_vector is not None
    scores = meaning.similarities(query_vector, meaning.embed(STATEMENTS))
    ranked = [text for _, text in sorted(zip(scores, STATEMENTS, strict=True), reverse=True)]
    assert ranked[0] == related, list(zip(STATEMENTS, scores, strict=True))


@needs_model
def test_gift_ideas_are_nearer_the_teapot_than_the_boiler() -> None:
    query = meaning.embed_query("gift ideas for Maria")
    assert query is not None
    teapot, boiler = meaning.similarities(
        query, meaning.embed(["she'd love that teal teapot", "the boiler needs servicing"])
    )
    assert teapot > boiler


WORDWISE_TEXTS = [
    "He keeps sending me links to that Fellow Stagg pour-over kettle, the matte black one.",
    "Marcaram a cirurgia da mãe: 14 de outubro, no Hospital São Camilo da Pompeia.",
    "Booking ref KQ7ZPM; seats 31A/31B; £1,150 a month (R$ 3.500 ≈ CAD 880)!",
    "Ça va? Straße, naïve café, 東京, 🎉🎉 party, e-mail: joao.souza.pix@gmail.com",
    "A2 pulley strain — left ring finger; rice bucket x3/day… “no crimping”",
    "tab\tand\nnew line   and   spaces",
    "a <s> b </s> c <unk>",  # special tokens: through the tokenizer whole
    "odd \u2581marks\u2581 inside▁words",  # the word mark itself: likewise
]


@needs_model
def test_word_by_word_tokens_are_the_whole_text_s_tokens() -> None:
    model = meaning._model()
    # The shipped vocabulary lets no token span two words, so words may be
    # tokenized one by one and looked up.
    assert model.wordwise
    prepared = [meaning._prepare(t) for t in WORDWISE_TEXTS]
    whole = [e.ids for e in model.tokenizer.encode_batch_fast(prepared, add_special_tokens=False)]
    assert meaning._token_ids(model, prepared) == whole
    assert meaning._token_ids(model, prepared) == whole  # from the cache this time


@needs_model
def test_the_word_cache_is_bounded_and_starts_over_when_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = meaning._model()
    first = meaning.embed(WORDWISE_TEXTS)
    monkeypatch.setattr(meaning, "WORD_CACHE", 8)
    again = meaning.embed(WORDWISE_TEXTS)  # more distinct words than the cache holds
    assert again == first
    # It started over with the last batch's words: no more than one batch holds.
    batch_words = {w for t in WORDWISE_TEXTS for w in meaning._prepare(t).split(" ")}
    assert len(model.words) <= len(batch_words)
    meaning.embed(["one two"])  # a batch that fits after a start-over
    assert len(model.words) <= max(len(batch_words), 8)
    monkeypatch.setattr(model, "wordwise", False)
    assert meaning.embed(WORDWISE_TEXTS) == first  # the whole-text path agrees


@needs_model
def test_an_idle_model_is_let_go_and_loads_again_to_the_same_vectors() -> None:
    import time

    text = ["She kept talking about that teal teapot."]
    [before] = meaning.embed(text)
    now = time.monotonic()
    assert not meaning.release_if_idle(now, idle=3600.0)  # used a moment ago
    assert meaning._loaded is not None
    assert meaning.release_if_idle(now + 3600.0, idle=60.0)
    assert meaning._loaded is None
    assert not meaning.release_if_idle(now + 7200.0, idle=60.0)  # nothing left to let go
    assert meaning.embed(text) == [before]
    assert meaning._loaded is not None
