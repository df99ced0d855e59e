"""The BM25 tokens, held to ``bm25s.tokenize`` itself (English stopwords, PyStemmer English)."""

from __future__ import annotations

import bm25s
import pytest
import Stemmer
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl_memory.bm25_tokens import ENGLISH_STOPWORDS, document_tokens, query_tokens
from loopctl_memory.scoring import split_whitespace
from loopctl_memory.sql.lexical.inversion import invert_block

ORACLE_STEMMER = Stemmer.Stemmer("english")


def oracle(texts: list[str]) -> list[list[str]]:
    """bm25s's tokens of each text, as strings."""
    tokens: list[list[str]] = bm25s.tokenize(
        texts, stopwords="en", stemmer=ORACLE_STEMMER, return_ids=False, show_progress=False
    )
    return tokens


# Words that stem, stopwords in any case, and characters that lowercasing or \w treat
# specially: dotted capital I (lowercases to i + a combining dot), Greek capital sigma
# (final or not), sharp s, a ligature, digits of other scripts, underscores.
WORDS = [
    "running",
    "Runs",
    "RUNNER",
    "generously",
    "caresses",
    "ponies",
    "The",
    "THE",
    "the",
    "a",
    "Is",
    "not",
    "with",
    "their",
    "x",
    "İstanbul",
    "ΟΔΟΣ",
    "Σigma",
    "straße",
    "ﬁle",
    "٣٤",
    "snake_case",
    "__init__",
    "42",
    "café",
    "naïve",
    "東京",
]
SEPARATORS = [" ", "  ", "\n", "\t", ".", ",", "-", "'", ":", "!?", "/", "(", ")", "\u00a0", ""]
CHARACTERS = st.characters(
    categories=("Lu", "Ll", "Lt", "Lo", "Mn", "Nd", "Pc", "Pd", "Po", "Zs", "Sm"),
)


def texts() -> st.SearchStrategy[str]:
    piece = st.one_of(st.sampled_from(WORDS), st.text(CHARACTERS, max_size=8))
    parts = st.lists(st.tuples(piece, st.sampled_from(SEPARATORS)), max_size=12)
    return parts.map(lambda pairs: "".join(word + separator for word, separator in pairs))


@settings(max_examples=400, derandomize=True, database=None, deadline=None)
@given(st.lists(texts(), min_size=1, max_size=5))
def test_query_tokens_are_bm25s_tokens(batch):
    assert oracle(batch) == [query_tokens(text) for text in batch]


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(texts(), st.lists(texts(), max_size=4))
def test_document_tokens_are_those_of_the_text_and_tags_joined_by_spaces(memory, tags):
    assert oracle([" ".join([memory, *tags])]) == [document_tokens(memory, tags)]


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", []),
        ("a I x", []),  # one-letter words are no words
        ("The cat is on the mat", ["cat", "mat"]),
        ("Running runners RUN, ran; runs!", ["run", "runner", "run", "ran", "run"]),
        ("caresses ponies generously", ["caress", "poni", "generous"]),
        ("snake_case __init__ 42 x1", ["snake_cas", "__init__", "42", "x1"]),
        ("THE The the NOT Not", []),
        ("user's e-mail", ["user", "mail"]),
    ],
)
def test_named_examples(text, tokens):
    assert tokens == query_tokens(text)
    assert [tokens] == oracle([text])


def test_the_document_is_the_text_then_each_tag():
    assert ["deploy", "friday", "op", "releas"] == document_tokens(
        "Deploy on Friday", ["ops", "release"]
    )
    assert ["deploy"] == document_tokens("Deploy", [])


def test_stopwords_are_bm25s_english_list():
    assert ENGLISH_STOPWORDS == frozenset(bm25s.stopwords.STOPWORDS_EN)


_SPLITTING = "\x1c\x1f\x85\u00a0\u2028\u3000\u200b"
# Capital, small and final sigma, dotted capital I, capital I, dotless i.
_CASED = "ab \u03a3\u03c3\u03c2\u0130I\u0131"


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(texts(), st.text(st.sampled_from(_CASED + _SPLITTING), max_size=12)),
            st.lists(texts(), max_size=3),
        ),
        max_size=6,
    )
)
def test_a_block_inverted_at_once_holds_each_documents_tokens_words_and_length(documents):
    """The block inversion (tokens and tags cut once each) against each document on its own."""
    texts = [(n + 3, memory.lower()) for n, (memory, _) in enumerate(documents)]
    tag_values = [(n + 3, tag.lower()) for n, (_, tags) in enumerate(documents) for tag in tags]
    block = invert_block(texts, tag_values)
    expected_tokens: dict[str, list[int]] = {}
    expected_words: dict[str, dict[int, int]] = {}
    expected_lengths = {}
    for seq, memory in texts:
        for token in sorted(set(split_whitespace(memory))):
            expected_tokens.setdefault(token, []).append(seq)
        tags = [tag for tag_seq, tag in tag_values if tag_seq == seq]
        words = document_tokens(memory, tags)
        for word in words:
            counted = expected_words.setdefault(word, {})
            counted[seq] = counted.get(seq, 0) + 1
        if words:
            expected_lengths[seq] = len(words)
    assert expected_tokens == block.tokens.by_term()
    postings = block.words
    held: dict[str, dict[int, int]] = {}
    for term, seq, count in zip(
        postings.term_of.tolist(), postings.seqs.tolist(), postings.counts.tolist(), strict=True
    ):
        held.setdefault(postings.terms[term], {})[seq] = count
    assert expected_words == held
    assert expected_lengths == dict(
        zip(block.lengths.seqs.tolist(), block.lengths.lengths.tolist(), strict=True)
    )
    expected_tags: dict[str, list[int]] = {}
    for seq, tag in tag_values:
        if seq not in expected_tags.setdefault(tag, []):
            expected_tags[tag].append(seq)
    assert expected_tags == block.tags.by_term()
