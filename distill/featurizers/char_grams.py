"""Character 4-grams of ASCII text hashed in numpy: exactly what ``HashingVectorizer(analyzer="char_wb",
ngram_range=(4, 4))`` counts, at about a third of its CPU.

scikit-learn slices every 4-gram into a Python string and feeds it to the hasher through a Python generator: about
25 µs a USS user turn, the largest single part of featurizing a conversation. In ASCII a 4-gram is four bytes, one
little-endian int32, and scikit-learn's own ``murmurhash3_32`` of an int32 array hashes exactly those four bytes,
so a batch's grams are hashed in one call. Texts with other characters (where a character is not a byte) and other
n-gram ranges take scikit-learn's path; a test compares both paths on generated text.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.utils import murmurhash3_32

_SPACE = ord(" ")


def char_wb_counts(vectorizer: HashingVectorizer, texts: list[str]) -> sp.csr_matrix:
    """``vectorizer.transform(texts)`` for a counting char_wb vectorizer; its ASCII texts hashed in numpy when it
    counts 4-grams."""
    if tuple(vectorizer.ngram_range) != (4, 4):
        return sp.csr_matrix(vectorizer.transform(texts))
    fast = [i for i, text in enumerate(texts) if text.isascii()]
    rows, cols = _ascii_4grams([texts[i] for i in fast], vectorizer.n_features)
    rows = np.asarray(fast, dtype=np.int64)[rows] if len(fast) < len(texts) else rows
    others = [i for i, text in enumerate(texts) if not text.isascii()]
    if others:
        rest = sp.coo_matrix(vectorizer.transform([texts[i] for i in others]))
        rows = np.concatenate([rows, np.asarray(others, dtype=np.int64)[rest.row]])
        cols = np.concatenate([cols, rest.col.astype(np.int64)])
        values = np.concatenate([np.ones(len(rows) - rest.nnz, dtype=vectorizer.dtype), rest.data])
    else:
        values = np.ones(len(rows), dtype=vectorizer.dtype)
    counts = sp.csr_matrix((values, (rows, cols)), shape=(len(texts), vectorizer.n_features), dtype=vectorizer.dtype)
    counts.sum_duplicates()
    return counts


def _ascii_4grams(texts: list[str], n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """(text row, hashed column) of every char_wb 4-gram: each word padded with one space on either side, its
    4-grams, or the padded word itself when it is shorter (a one-character word)."""
    padded = [" " + "  ".join(words) + " " if (words := text.lower().split()) else "" for text in texts]
    buffer = "".join(padded).encode("ascii")
    size = len(buffer)
    row_of = np.repeat(np.arange(len(texts), dtype=np.int64), [len(p) for p in padded])
    spaces = np.frombuffer(buffer, dtype=np.uint8) == _SPACE
    starts = np.zeros(size, dtype=bool)  # where a padded word begins: a space after a space (texts end in one)
    starts[:1] = True
    starts[1:] = spaces[1:] & spaces[:-1]
    word = np.cumsum(starts)
    rows = np.empty(0, dtype=np.int64)
    cols = np.empty(0, dtype=np.int64)
    if size >= 4:
        grams = np.ndarray(shape=(size - 3,), dtype="<i4", buffer=buffer, strides=(1,))
        inside = word[:-3] == word[3:]  # the four bytes lie in one padded word
        rows = row_of[:-3][inside]
        cols = _column(murmurhash3_32(np.ascontiguousarray(grams[inside]), seed=0), n_features)
    first = np.flatnonzero(starts)
    short = first[np.diff(first, append=size) == 3]  # " x ": a one-character word is its own gram
    if len(short):
        rows = np.concatenate([rows, row_of[short]])
        cols = np.concatenate([cols, [_short_gram_column(buffer[i:i + 3], n_features) for i in short]])
    return rows, cols


def _column(hashes: np.ndarray, n_features: int) -> np.ndarray:
    """scikit-learn's column of a signed 32-bit hash: ``abs(h) % n`` (its special case for -2**31 is the same
    number, computed in 64 bits)."""
    return np.abs(hashes.astype(np.int64)) % n_features


@lru_cache(maxsize=4096)
def _short_gram_column(gram: bytes, n_features: int) -> int:
    return int(_column(np.asarray([murmurhash3_32(gram, seed=0)]), n_features)[0])
