"""Featurizers: transformer API, user/context separation, config round trip, MiniLM, OpenAI batching+cache."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import hypothesis.strategies as st
import numpy as np
import openai
import pytest
import scipy.sparse as sp
from hypothesis import given
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.pipeline import FeatureUnion

from distill.featurizers.base import user_turns_in_context
from distill.featurizers.char_grams import _column, char_wb_counts
from distill.featurizers.hashing import HashingFeaturizer, words, words_and_pairs
from distill.featurizers.openai_api import OpenAIFeaturizer
from distill.featurizers.spec import featurizer_config, featurizer_from_config, featurizer_name, make_featurizer
from monitor.contracts.errors import ConfigError
from monitor.contracts.events import Conversation, Turn

SMALL = {"n_word_features": 256, "n_char_features": 256, "n_context_features": 128, "n_last_features": 128}


def conv(cid: str, *turns: tuple[str, str]) -> Conversation:
    return Conversation(conversation_id=cid, turns=[Turn(index=i, role=r, text=t) for i, (r, t) in enumerate(turns)])


A = conv("a", ("user", "how do I reset my router"), ("assistant", "sorry, I cannot help"), ("user", "thanks anyway"))
B = conv("b", ("user", "sorry, I cannot help"), ("assistant", "how do I reset my router"), ("user", "thanks anyway"))


def test_turn_pairs_group_assistant_text_since_previous_user_turn() -> None:
    c = conv("c", ("assistant", "hi"), ("user", "q1"), ("user", "q2"), ("assistant", "a1"), ("assistant", "a2"),
             ("user", "ok"))
    assert [(p.user, p.context) for p in user_turns_in_context(c)] == [("q1", "hi"), ("q2", ""), ("ok", "a1\na2")]


def test_hashing_is_stateless_sparse_and_keeps_sides_apart() -> None:
    f = HashingFeaturizer(**SMALL)
    X = f.transform([A, B])  # no fit needed
    assert sp.issparse(X) and X.shape == (2, 768) and X.dtype == np.float32
    assert f.fit([A]) is f and f.n_features_out_ == 768
    np.testing.assert_allclose(X.toarray(), f.transform([A, B]).toarray())
    user_a, user_b = X[0, :512].toarray(), X[1, :512].toarray()
    assert not np.allclose(user_a, user_b)  # same words overall, but said by different sides
    np.testing.assert_allclose(X[:, 512 + 128 :].toarray()[0], X[:, 512 + 128 :].toarray()[1])  # same last turn


def test_hashing_context_weight_scales_context_block_only() -> None:
    X0 = HashingFeaturizer(**SMALL, context_weight=0.0).transform([A]).toarray()
    X1 = HashingFeaturizer(**SMALL, context_weight=1.0).transform([A]).toarray()
    assert np.abs(X0[0, 512:640]).sum() == 0 and np.abs(X1[0, 512:640]).sum() > 0
    np.testing.assert_allclose(X0[0, :512], X1[0, :512])


@pytest.mark.parametrize(
    ("params", "match"),
    [({"n_word_features": 0}, r"'n_word_features' parameter of HashingFeaturizer must be an int >= 1. Got 0"),
     ({"context_weight": -1}, r"'context_weight' parameter of HashingFeaturizer must be a float >= 0. Got -1")],
)
def test_hashing_parameter_errors(params: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        HashingFeaturizer(**params).fit([A])


def test_transform_rejects_non_conversations() -> None:
    with pytest.raises(ConfigError, match="expects a list of Conversation objects. Got str"):
        HashingFeaturizer().transform("hello")


def test_spec_parsing_and_config_round_trip() -> None:
    union = make_featurizer("hashing+minilm")
    assert isinstance(union, FeatureUnion) and featurizer_name(union) == "hashing+minilm"
    config = json.loads(json.dumps(featurizer_config(union)))
    rebuilt = featurizer_from_config(config)
    assert featurizer_name(rebuilt) == "hashing+minilm"
    assert rebuilt.transformer_list[0][1].get_params() == union.transformer_list[0][1].get_params()
    single = make_featurizer("hashing", **SMALL)
    np.testing.assert_allclose(
        featurizer_from_config(featurizer_config(single)).transform([A]).toarray(), single.transform([A]).toarray()
    )
    with pytest.raises(ConfigError, match=r"unknown featurizer 'bow'"):
        make_featurizer("hashing+bow")
    with pytest.raises(ConfigError, match="names a featurizer twice"):
        make_featurizer("hashing+hashing")


def test_minilm_and_union_on_a_handful_of_texts(onnx_cache: str) -> None:
    union = make_featurizer("hashing+minilm", model_cache_dir=onnx_cache)
    union.set_params(hashing__n_word_features=64, hashing__n_char_features=64, hashing__n_context_features=32,
                     hashing__n_last_features=32)
    C = conv("c", ("user", "thank you so much, that was perfect"))
    D = conv("d", ("user", "thanks a lot, exactly what I needed"))
    E = conv("e", ("user", "this is wrong and useless"), ("assistant", "sorry"), ("user", "still wrong"))
    X = union.fit_transform([C, D, E])
    assert X.shape == (3, 192 + 3 * 384)
    emb = make_featurizer("minilm", model_cache_dir=onnx_cache).transform([C, D, E])
    norms = np.linalg.norm(emb[:, :384], axis=1)  # mean of unit vectors: 1 for one user turn, less for two
    assert emb.shape == (3, 1152) and np.allclose(norms[:2], 1, atol=1e-5) and norms[2] < 1
    sim = emb[:, :384] @ emb[:, :384].T
    assert sim[0, 1] > sim[0, 2] + 0.1  # two thank-yous are closer than thanks vs complaint
    assert np.abs(emb[:2, 768:]).sum() == 0 and np.abs(emb[2, 768:]).sum() > 0  # context block


def _embedding_server(calls: list[list[str]]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        calls.append(body["input"])
        data = [{"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0, float(t.count("a"))]}
                for i, t in enumerate(body["input"])]
        return httpx.Response(200, json={"object": "list", "data": data, "model": body["model"],
                                         "usage": {"prompt_tokens": 1, "total_tokens": 1}})

    return httpx.Client(transport=httpx.MockTransport(handler))


def test_openai_batches_and_caches_by_content_hash(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    client = openai.OpenAI(api_key="test", base_url="http://embed.test/v1", http_client=_embedding_server(calls))
    f = OpenAIFeaturizer(client=client, batch_size=2, cache_dir=str(tmp_path))
    X = f.transform([A, B])
    # unique texts: 2 user turns + "thanks anyway" + 2 contexts ... deduplicated across conversations
    unique = {"how do I reset my router", "sorry, I cannot help", "thanks anyway"}
    assert {t for batch in calls for t in batch} == unique and max(len(b) for b in calls) == 2
    assert X.shape == (2, 9)
    n = len(calls)
    np.testing.assert_allclose(f.transform([A, B]), X)
    assert len(calls) == n  # in-memory cache
    fresh = OpenAIFeaturizer(client=client, batch_size=2, cache_dir=str(tmp_path))
    np.testing.assert_allclose(fresh.transform([B]), X[1:])
    assert len(calls) == n  # disk cache, keyed by content hash
    assert "client" not in featurizer_config(f)["parts"][0]["params"]


def test_openai_without_client_says_how_to_fix() -> None:
    with pytest.raises(ConfigError, match="OpenAIFeaturizer needs an OpenAI client"):
        OpenAIFeaturizer().transform([A])


def test_hashing_char_block_is_4_grams_and_old_models_keep_theirs(tmp_path: Path) -> None:
    """New models hash char_wb 4-grams; a model trained with 3-5-grams rebuilds with 3-5-grams."""
    from distill.registry import ModelRegistry
    from distill.train import train_items
    from monitor.contracts.rubric_set import load_rubric_set
    from monitor.contracts.settings import REPO_ROOT
    from monitor.stages.classify import load_live
    from tests.support.model_fixtures import simulated_training_set

    assert HashingFeaturizer().char_ngram_range == (4, 4)
    rubric = load_rubric_set("spur-copilot", REPO_ROOT / "prompts")
    old = HashingFeaturizer(char_ngram_range=(3, 5))
    data = simulated_training_set(rubric, n=120)
    trained = train_items(data, old, rubric=rubric, min_positives=5)
    assert trained.model.featurizer["parts"][0]["params"]["char_ngram_range"] == [3, 5]
    registry = ModelRegistry(tmp_path)
    version = registry.publish("distilled", trained.model.to_arrays(), trained.model.manifest(), promote=True)
    live = load_live(registry, rubric, version, kind="distilled")
    assert live.featurizer.char_ngram_range == (3, 5)
    X_old = old.transform(data.conversations)
    assert (live.featurizer.transform(data.conversations) != X_old).nnz == 0  # featurizes as trained
    assert (HashingFeaturizer().transform(data.conversations) != X_old).nnz > 0  # the new default differs
    np.testing.assert_allclose(live.model.predict_proba(X_old), trained.model.predict_proba(X_old))


def test_shape_featurizer_counts_turns_beside_text() -> None:
    from distill.featurizers.shape import ShapeFeaturizer

    X = ShapeFeaturizer().transform([A, conv("d", ("user", "hi"))])
    np.testing.assert_allclose(X, np.log1p([[3, 2], [1, 1]]) / 3, rtol=1e-6)
    np.testing.assert_allclose(ShapeFeaturizer(weight=2.0).transform([A]), 2 * X[:1], rtol=1e-6)
    union = make_featurizer("hashing+shape")
    assert featurizer_name(union) == "hashing+shape"
    rebuilt = featurizer_from_config(json.loads(json.dumps(featurizer_config(union))))
    Xu = rebuilt.transform([A, B])
    assert Xu.shape[1] == HashingFeaturizer().fit([A]).n_features_out_ + 2
    np.testing.assert_allclose(Xu.toarray()[:, -2:], ShapeFeaturizer().transform([A, B]), rtol=1e-6)
    with pytest.raises(ConfigError, match="'weight' parameter of ShapeFeaturizer must be a float >= 0"):
        ShapeFeaturizer(weight=-1).transform([A])


@given(st.text(st.sampled_from(list("ab Cd éÉ_1 \n\t.,'-ßİ")), max_size=40))
def test_words_and_pairs_are_what_scikit_learns_word_analyzer_gives(text: str) -> None:
    """The hashing featurizer's own word 1-2-gram analyzer (cheaper) hashes exactly scikit-learn's terms, in order,
    so models trained before it score the same."""
    assert words_and_pairs(text) == HashingVectorizer(ngram_range=(1, 2)).build_analyzer()(text)


def test_hashing_features_equal_those_of_scikit_learns_word_analyzer(monkeypatch: pytest.MonkeyPatch) -> None:
    conversations = [Conversation(conversation_id=str(i), turns=[
        Turn(index=0, role="assistant", text="Hello! How can I help?"),
        Turn(index=1, role="user", text=f"I need a Taxi to the   hotel, number {i}. THANKS a lot"),
        Turn(index=2, role="assistant", text="Booked."),
        Turn(index=3, role="user", text="Great, thank you! Über-nice café")]) for i in range(5)]
    fast = HashingFeaturizer().fit(conversations).transform(conversations)
    monkeypatch.setattr("distill.featurizers.hashing.words_and_pairs",
                        lambda text: HashingVectorizer(ngram_range=(1, 2)).build_analyzer()(text))
    assert (fast != HashingFeaturizer().fit(conversations).transform(conversations)).nnz == 0


_CHARS = st.text(st.sampled_from(list("abcXYZ 019 ?!.,'-_\t\n\r\x0b\x0c\x1céßİ€😀")), max_size=30)


@given(st.lists(_CHARS, min_size=1, max_size=6), st.sampled_from([2**15, 7, 1000]), st.sampled_from([(4, 4), (3, 5)]))
def test_char_grams_hashed_in_numpy_are_scikit_learns(texts: list[str], n_features: int,
                                                       ngram_range: tuple[int, int]) -> None:
    """The char block's numpy hashing (ASCII text, 4-grams) counts exactly what scikit-learn's char_wb analyzer
    does, in a batch mixing ASCII and other texts, one-character words, blanks and runs of whitespace."""
    vectorizer = HashingVectorizer(n_features=n_features, analyzer="char_wb", ngram_range=ngram_range,
                                   lowercase=True, alternate_sign=False, norm=None, dtype=np.float32)
    expected = vectorizer.transform(texts)
    got = char_wb_counts(vectorizer, texts)
    assert got.shape == expected.shape and got.dtype == np.float32
    assert (got != expected).nnz == 0


def test_hashed_column_matches_scikit_learns_rule_for_the_lowest_hash() -> None:
    """scikit-learn maps the hash -2**31 (whose abs overflows 32 bits) to ``(2**31 - 1 - (n - 1)) % n``."""
    for n in (7, 1000, 2**15):
        assert _column(np.asarray([-2**31, -5, 5], dtype=np.int32), n).tolist() == [
            (2147483647 - (n - 1)) % n, 5 % n, 5 % n]


@given(st.text(st.sampled_from(list("ab Cd éÉ_1 \n\t.,'-ßİ")), max_size=40))
def test_words_are_what_scikit_learns_unigram_analyzer_gives(text: str) -> None:
    assert words(text) == HashingVectorizer(ngram_range=(1, 1)).build_analyzer()(text)


def _by_scikit_learn(conversations: list[Conversation], f: HashingFeaturizer) -> sp.csr_matrix:
    """The featurizer as it was built from four HashingVectorizers (before its own hashing paths)."""
    from sklearn.preprocessing import normalize

    pairs = [user_turns_in_context(c) for c in conversations]
    owner = sp.csr_matrix(sp.block_diag([np.ones((1, len(p)), dtype=np.float32) for p in pairs]))
    common = {"alternate_sign": False, "norm": None, "dtype": np.float32}

    def block(vectorizer: HashingVectorizer, texts: list[str], weight: float, rows: sp.csr_matrix) -> sp.csr_matrix:
        counts = sp.csr_matrix(rows @ vectorizer.transform(texts), dtype=np.float32)
        counts.data = np.log1p(counts.data)
        return normalize(counts) * np.float32(weight)

    users = [p.user for ps in pairs for p in ps]
    identity = sp.identity(len(conversations), dtype=np.float32, format="csr")
    return sp.hstack([
        block(HashingVectorizer(n_features=f.n_word_features, ngram_range=(1, 2), **common), users, 1, owner),
        block(HashingVectorizer(n_features=f.n_char_features, analyzer="char_wb", ngram_range=f.char_ngram_range,
                                **common), users, 1, owner),
        block(HashingVectorizer(n_features=f.n_context_features, **common), [p.context for ps in pairs for p in ps],
              f.context_weight, owner),
        block(HashingVectorizer(n_features=f.n_last_features, ngram_range=(1, 2), **common),
              [ps[-1].user for ps in pairs], f.last_turn_weight, identity)], format="csr")


@pytest.mark.parametrize("params", [{}, {**SMALL, "n_last_features": 96}, {"char_ngram_range": (3, 5)}])
def test_hashing_features_are_those_of_scikit_learns_vectorizers(params: dict) -> None:
    """Its own paths (numpy char 4-grams, the last turn's terms folded from the turns' hashes when its width
    divides theirs, the hasher without the vectorizer's wrappers) give scikit-learn's features exactly."""
    conversations = [A, B, conv("c", ("assistant", "Hi! Zoë here.")), conv("d", ("user", "a b  c\td"),
                     ("assistant", "ok"), ("user", "Ünïcode ça va? I'm fine"), ("user", "x"))]
    f = HashingFeaturizer(**params).fit(conversations)
    got, expected = f.transform(conversations), _by_scikit_learn(conversations, f)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got.toarray(), expected.toarray())
