"""Gate features: how answerable a query looks, from what one search already produced.

A pure function of the channel lists (Retrieval.lists), the final hits and the index view: no second
search. Scores are never min-max normalised per query (the top would always become 1); each feature
is an absolute quantity (a cosine, a difference of cosines, a share of query terms, a BM25 score over
the query's own total IDF), so the same value means the same thing from one query to the next.

The one lookup beyond the lists is the document frequency of the query's terms (for the IDF
normaliser), read from the table the index writer stores (search_core.index.term_df), and the text of the top note's best
chunk (one row by primary key). Both are sub-millisecond; benchmarks/bench_gate.py measures the cost.
"""

from __future__ import annotations

import math
import re

import numpy as np

from search_core.config import NGRAM_LIST
from search_core.index import ngram_postings
from search_core.index import term_df
from search_core.index import word_df
from search_core.index.term_df import DB_ERRORS
from search_core.search.channels import TOKEN_RE, query_terms
from search_core.ingest.graph import normalize_name

TOP_K = 10                   # the top-k the WIG/NQC-like statistics read: 10 cosines
MAX_WORDS = 32               # unknown_words reads at most this many words: 32 x ~5 primary-key reads
AGREE_K = 5                  # dense-vs-sparse agreement is measured on the top 5 notes
RANK_DEPTH = 50              # the first result's rank is looked for in each channel's top 50
CROSS_SCRIPT_GAP = 0.5       # half the letters change script: an all-Hangul question on an all-Latin chunk is 1.0
CONTENT_WORDS = 8            # content_words reads at most this many words: 8 x a few posting-list intersections
# particles and the commonest endings, longest first: stripped from a Hangul run when 2+ syllables stay
# ("임베딩을" -> 임베딩, "서버에서" -> 서버); an inflected stem that stays unseen is the fit's to weigh
PARTICLES = tuple(sorted((
    "은", "는", "이", "가", "을", "를", "의", "에", "로", "와", "과", "도", "만", "랑", "나", "서", "고", "면",
    "에서", "으로", "에게", "한테", "까지", "부터", "처럼", "보다", "이랑", "하고", "이나", "에는", "에도", "으로는",
    "에서는", "이라는", "라는", "하는", "했던", "했더라", "하기", "하면", "했지", "했어", "할때", "인가요", "인지",
    "이란", "란", "해서", "했나", "하나요", "이야", "였지", "이었지", "야"), key=len, reverse=True))
NGRAM_STALE = ("the index has no current n-gram lists (written before they existed): the content-word features "
               "(unseen_words ... rarest_in_top) read 0 and the gate decides without them; any `autoresearch index` "
               "run on the vault adds the lists")
HANGUL_RE = re.compile(r"[\uac00-\ud7a3\u3131-\u318e]")
LATIN_RE = re.compile(r"[A-Za-z]")
LATIN_WORD_RE = re.compile(r"[a-z][a-z0-9]*")      # over the lowercased query: "LightRAG를" -> "lightrag"

# Every feature, in a fixed order; the model stores the subset it uses. `rerank_top` is 0 with no reranker
# (and `reranked` says which it was), so a model fitted without a reranker never reads it.
FEATURES = {
    "top_cos": "cosine of the query with the best chunk in the index (the dense channel's top)",
    "hit_cos": "cosine of the query with the first result's chunk (what the cosine gate reads)",
    "cos_margin": "top-1 minus top-2 dense cosine (over notes)",
    "cos_wig": "top-1 minus the mean of the top-10 dense cosines (WIG-like)",
    "cos_spread": "standard deviation of the top-10 dense cosines (NQC-like)",
    "bm25_top_norm": "the top BM25 score divided by the query's total IDF",
    "sparse_found": "1 if the sparse (BM25) channel found any note",
    "bm25_wig": "top BM25 minus the mean of the top-10 BM25 scores (0 for a missing one), over the query's total IDF",
    "term_overlap": "share of query terms (trigrams and 1-2 character tokens) found in the first result's chunk",
    "idf_overlap": "IDF-weighted share of query terms found in the first result's chunk",
    "dense_idf_overlap": "IDF-weighted share of query terms found in the dense channel's top chunk (and its note's title)",
    "sparse_idf_overlap": "IDF-weighted share of query terms found in the sparse (BM25) channel's top chunk (and its note's title)",
    "meta_overlap": "IDF-weighted share of query terms in the first result's title, aliases, tags and summary",
    "heading_overlap": "IDF-weighted share of query terms in the heading path (title > section) of the first result's chunk",
    "unknown_words": "share of query words the index has never seen (a trigram or short word in no chunk)",
    "unknown_latin": "in a query with Hangul: share of its Latin-script words the index has never seen (0 otherwise)",
    "unknown_names": "in a query with Hangul: share of its Latin-script words no chunk holds as a whole word (0 otherwise)",
    "dense_sparse_agree": "share of the dense top-5 notes that are also in the sparse top-5",
    "top1_agree": "1 if the dense and sparse channels put the same note first",
    "title_match": "1 if the first result's title or an alias (2+ characters) appears in the query",
    "entity_found": "1 if the entity channel returned any note",
    # within-query forms with no scale of their own (a rank, a ratio of two scores of the same search): the
    # cosines and BM25 scores above move with the vault (its size, vocabulary, how alike its notes are), these
    # do not, and they carried better to a vault no fit had seen (BENCHMARKS.md, the gate, scale-free features)
    "dense_rank_inv": "1 / the rank of the first result in the dense channel's list (0 if not in its top 50)",
    "sparse_rank_inv": "1 / the rank of the first result in the sparse channel's list (0 if not in its top 50)",
    "cos_margin_ratio": "top-1 minus top-2 dense cosine, over top-1 minus top-10 (the margin as a share of the spread)",
    "cos_z10": "the top dense cosine's z-score within the query's own top 10",
    "bm25_ratio2": "the second BM25 score over the first",
    "bm25_wig_ratio": "top BM25 minus the mean of the top 10 (0 for a missing one), over the top",
    "bm25_margin_ratio": "top-1 minus top-2 BM25, over top-1 (1 with one sparse hit)",
    # across scripts (an English question on a Korean note, a Korean one on a note that is code) the lexical
    # features have nothing to match, so only the dense channel's own within-query evidence says answerable;
    # the products let a linear gate weigh that evidence there alone
    "script_gap": "|Hangul share of the query's letters - Hangul share of the dense channel's top chunk's (title, heading path, text)|",
    "cross_script": "1 if script_gap > CROSS_SCRIPT_GAP: the query and its nearest chunk are written in different scripts",
    "cross_script_cos_z10": "cross_script x cos_z10",
    "cross_script_dense_rank_inv": "cross_script x dense_rank_inv",
    "cross_script_cos_margin_ratio": "cross_script x cos_margin_ratio",
    # the query's content words (a Hangul run without its particle, a Latin or digit run; 2+ characters each,
    # the first CONTENT_WORDS of them), looked up whole in the n-gram posting lists (a word is in a note when
    # every one of its n-grams is): a probe often names one thing the vault never mentions, and a near-topic
    # note covers the query's common words but not its rare one; 0 on an index without the n-gram lists
    "unseen_words": "share of the query's content words no note holds (every n-gram of the word in one note)",
    "unseen_any": "1 if any content word of the query is in no note",
    "word_coverage": "share of the query's content words found in the first result's chunk (title, heading path, text)",
    "word_coverage_idf": "word_coverage weighted by each word's IDF over notes (an unseen word weighs the most)",
    "rarest_in_top": "1 if the query's rarest content word (fewest notes) is in the first result's chunk",
    # the same words against where a note says what it is about: its title, aliases and the chunk's heading path.
    # A near-topic probe's rare word sits in the text of a note about something else ("부대찌개" in a 김치찌개
    # note); a note about it names it there
    "heading_word_coverage_idf": "word_coverage_idf over the first result's title, aliases and chunk heading path only",
    "rarest_in_heading": "1 if the query's rarest content word is in the first result's title, aliases or heading path",
    # candidates: the first result's whole note against the query's content words, read from the same n-gram
    # lists (a near-topic note names the query's rare word once in passing; a note about it repeats it)
    "note_word_coverage_idf": "word_coverage_idf over the first result's whole note (every chunk and its fields)",
    "note_word_tf_idf": "the content words' counts in the first result's note, each saturated as BM25 does "
                        "(tf / (tf + 1.2 (0.25 + 0.75 note length / mean note length))), IDF-weighted mean",
    "unseen_stems": "share of the query's content words whose stem no note holds (a Hangul word's first two "
                    "syllables, any other word whole): an unseen name, where an unseen inflection keeps its stem",
    # the n-gram BM25 list (the keyword channel's own under keyword_index ngram, run beside FTS5 otherwise)
    "ngram_rank_inv": "1 / the rank of the first result in the n-gram BM25 list (0 if not in its top 50)",
    "ngram_top1_dense": "1 if the n-gram BM25 list and the dense channel put the same note first",
    "ngram_margin_ratio": "top-1 minus top-2 n-gram BM25 score, over top-1 (1 with one hit, 0 with none)",
    "ngram_top_norm": "the top n-gram BM25 score over the query's total n-gram IDF (an unseen n-gram at df 0)",
    "rerank_top": "the reranker's top score (0 with no reranker)",
    "reranked": "1 if a reranker ordered the results",
    "query_chars": "log(1 + characters in the query)",
    "hangul_share": "share of the query's letters that are Hangul",
    "latin_share": "share of the query's letters that are Latin",
}
FEATURE_NAMES = tuple(FEATURES)

# The feature sets a gate is fitted on, by name: one table that the shipped default (benchmarks/
# bench_gate_scalefree.py --write-default), `calibrate`'s refit, the sweep's gate rounds and the A/B's fitted
# gate all read through GATE_FEATURES. None reads the query's length or script mix (on the demo sets query
# length alone has AUROC 0.83 because its probes are short: a property of the set, not of answerability).
# "transferable-16": the default until 2026-12-02, chosen over six rounds by the default's transfer between
# the demo sets, KorQuAD and AutoRAG-ko (docs/gate.md). "scale-free-23": those 16 and the seven within-query
# ranks and ratios; with them a refit carried better to the johngrib wiki, a vault no fit had seen (0.838 vs
# 0.819 mean balanced accuracy on its two spent sets; BENCHMARKS.md, the gate, scale-free features).
FEATURE_SETS = {
    "transferable-16": ("top_cos", "cos_margin", "cos_wig", "cos_spread", "bm25_top_norm", "sparse_found",
                        "term_overlap", "idf_overlap", "sparse_idf_overlap", "meta_overlap", "unknown_words",
                        "unknown_latin", "unknown_names", "dense_sparse_agree", "top1_agree", "title_match"),
}
FEATURE_SETS["scale-free-23"] = FEATURE_SETS["transferable-16"] + (
    "dense_rank_inv", "sparse_rank_inv", "cos_margin_ratio", "cos_z10", "bm25_ratio2", "bm25_wig_ratio",
    "bm25_margin_ratio")
# "cross-script-27": those 23 and cross_script with its products with the dense evidence; chosen by the same
# rule over the four spent johngrib sets (fitted on demo + AutoRAG-ko): 0.855 mean balanced accuracy at the
# fit's cut and AUROC 0.935 at C = 0.3, against 0.847 and 0.937 for scale-free-23 at C = 0.1 (BENCHMARKS.md,
# the gate, cross-script features). script_gap is computed, not in a set: alone it did less.
FEATURE_SETS["cross-script-27"] = FEATURE_SETS["scale-free-23"] + (
    "cross_script", "cross_script_cos_z10", "cross_script_dense_rank_inv", "cross_script_cos_margin_ratio")
# "words-32": those 27 and five about the query's content words looked up whole in the n-gram lists
# (unseen_words ... rarest_in_top); chosen by the mean balanced accuracy over left-out vaults among the recipes
# worse on no left-out vault beyond noise: 0.843 against 0.832, AutoRAG-ko +0.076 (BENCHMARKS.md, the gate).
FEATURE_SETS["words-32"] = FEATURE_SETS["cross-script-27"] + (
    "unseen_words", "unseen_any", "word_coverage", "word_coverage_idf", "rarest_in_top")
# "overlaps-35": those 32 and three overlaps every search computed and no set read (heading_overlap,
# dense_idf_overlap, bm25_wig); chosen the same way over six left-out vaults: 0.863 against 0.859, worse on
# none beyond noise (BENCHMARKS.md, the gate)
FEATURE_SETS["overlaps-35"] = FEATURE_SETS["words-32"] + ("heading_overlap", "dense_idf_overlap", "bm25_wig")
# "ngram-40": those 35, the first result's own cosine (hit_cos, computed on every search) and the four read from
# the n-gram BM25 list the default fusion now leads with; chosen the same way over seven left-out vaults: 0.883
# against 0.866, AutoRAG-ko +0.055, worse on none beyond noise; kept over eight (0.895: no declared recipe has a
# better mean; without hit_cos 0.882) (BENCHMARKS.md, the gate)
FEATURE_SETS["ngram-40"] = FEATURE_SETS["overlaps-35"] + (
    "hit_cos", "ngram_rank_inv", "ngram_top1_dense", "ngram_margin_ratio", "ngram_top_norm")
GATE_FEATURE_SET = "ngram-40"


def feature_set(name: str) -> tuple[str, ...]:
    """The features of the set `name` in FEATURE_SETS; an unknown name is a ValueError naming the valid ones."""
    try:
        return FEATURE_SETS[name]
    except KeyError:
        raise ValueError(f"unknown gate feature set {name!r}; valid: {', '.join(FEATURE_SETS)}") from None


def unknown_features(names) -> list[str]:
    """The names in `names` that are not gate features (FEATURES)."""
    return [n for n in names if n not in FEATURES]


_bad = {k: unknown_features(v) for k, v in FEATURE_SETS.items() if unknown_features(v)}
if _bad:        # a misspelt name would be read as 0.0 on every row, fitted as a constant and dropped in silence
    raise ValueError(f"FEATURE_SETS name features that gate_features does not compute: {_bad}; valid: "
                     f"{', '.join(FEATURE_NAMES)}")
GATE_FEATURES = feature_set(GATE_FEATURE_SET)


# What a search computes whatever gate decides: arithmetic on the lists it already has (no read), hit_cos (what
# the cosine gate reads, and `calibrate` scores it by), and script_gap with its products (one chunk row, which
# the overlaps below read anyway). The rest is computed only when asked (features_read): a search computes what
# its gate and a later refit read, not the candidates a benchmark weighs.
ALWAYS = frozenset({
    "top_cos", "hit_cos", "cos_margin", "cos_wig", "cos_spread", "sparse_found", "dense_rank_inv", "sparse_rank_inv",
    "cos_margin_ratio", "cos_z10", "bm25_ratio2", "bm25_wig_ratio", "bm25_margin_ratio", "dense_sparse_agree",
    "top1_agree", "entity_found", "script_gap", "cross_script", "cross_script_cos_z10", "cross_script_dense_rank_inv",
    "cross_script_cos_margin_ratio", "rerank_top", "reranked", "query_chars", "hangul_share", "latin_share"})
WORD_FEATURES = ("unseen_words", "unseen_any", "word_coverage", "word_coverage_idf", "rarest_in_top")
HEADING_WORD_FEATURES = ("heading_word_coverage_idf", "rarest_in_heading")
NGRAM_FEATURES = ("ngram_rank_inv", "ngram_top1_dense", "ngram_margin_ratio", "ngram_top_norm")
NOTE_WORD_FEATURES = ("note_word_coverage_idf", "note_word_tf_idf", "unseen_stems")


def features_read(model_features=()) -> frozenset:
    """The features a search computes: GATE_FEATURES (what `calibrate`'s refit and the sweep's fitted gates
    read from logged and evaluated rows), the deciding model's own `model_features` (a gate file fitted on
    another set) and ALWAYS."""
    return frozenset(GATE_FEATURES) | frozenset(model_features) | ALWAYS


if unknown_features(ALWAYS):
    raise ValueError(f"ALWAYS names features that gate_features does not compute: {unknown_features(ALWAYS)}")


_term_df = term_df.counts      # the one reader and per-view cache, shared with the sparse channel


def _idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def _short_df(view, toks: list[str]) -> dict[str, int]:
    """Chunks holding each 1-2 character token, cached on the view like _term_df (a tuner round re-ranks
    every question: uncached, these lookups were a fifth of a 114-question fusion round)."""
    if not toks:
        return {}
    cache = view.caches.short_df
    todo = [t for t in toks if t not in cache]
    if todo:
        index = view.short_index()
        for t in todo:
            cache[t] = len(index.chunks_containing(t)) if index is not None else 0
    return {t: cache[t] for t in toks}


def query_idf(view, conn, query: str) -> float:
    """The query's total IDF, with the same idf = ln(1 + (N - df + .5)/(df + .5)) as the channels.
    Short tokens use the short-token index when the view has one (the channel's own lookup)."""
    trigrams, short = query_terms(query)
    n = max(len(view.chunk_note), 1)
    dfs = {**_term_df(view, conn, trigrams), **_short_df(view, short)}
    return sum(_idf(n, df) for df in dfs.values())


def term_overlap(query: str, text: str) -> float:
    trigrams, short = query_terms(query)
    terms = trigrams + short
    if not terms:
        return 0.0
    low = text.lower()
    return sum(t in low for t in terms) / len(terms)


def idf_overlap(view, conn, query: str, text: str) -> float:
    """term_overlap weighted by IDF: the share of the query's rare terms found in `text`. A near-topic
    probe ("LightRAG 실험 결과" beside a GraphRAG note) shares its common terms ("rag", "결과") with
    the top chunk and misses the rare ones."""
    trigrams, short = query_terms(query)
    n = max(len(view.chunk_note), 1)
    dfs = {**_term_df(view, conn, trigrams), **_short_df(view, short)}
    total = sum(_idf(n, df) for df in dfs.values())
    if total <= 0:
        return 0.0
    low = text.lower()
    return sum(_idf(n, df) for t, df in dfs.items() if t in low) / total


def unknown_words(view, conn, query: str) -> float:
    """Share of the query's words (up to MAX_WORDS) the index has never seen: a trigram of the word (or
    the 1-2 character word itself) occurs in no chunk. Most of the demo probes ask about a word with
    zero hits in the vault ("tokio", "캠핑", "오사카"), while their top chunk can still be close."""
    words = list(dict.fromkeys(TOKEN_RE.findall(query.lower())))[:MAX_WORDS]
    if not words:
        return 0.0
    grams = {w: [w[i:i + 3] for i in range(len(w) - 2)] for w in words if len(w) >= 3}
    dfs = _term_df(view, conn, sorted({g for gs in grams.values() for g in gs}))
    short = _short_df(view, [w for w in words if len(w) < 3])
    unknown = sum(short[w] == 0 if len(w) < 3 else any(dfs.get(g, 0) == 0 for g in grams[w]) for w in words)
    return unknown / len(words)


def unknown_latin(view, conn, query: str) -> float:
    """unknown_words restricted to the Latin-script words of a query that also has Hangul (0 for any other
    query). In a Korean vault a Latin word inside a Korean question is a name (a product, a library, an
    acronym); one the index never saw is a thing the vault does not know. A Latin word is a run of Latin
    letters and digits, so a particle does not stick to it ("LightRAG를" is "lightrag"). Korean words are left out: an
    inflected form ("삶는", "허락") is often unseen in a vault that can answer the question, and in an
    all-Latin (cross-lingual) question the English words are ordinary words, not names."""
    if not HANGUL_RE.search(query):
        return 0.0
    words = list(dict.fromkeys(LATIN_WORD_RE.findall(query.lower())))[:MAX_WORDS]
    if not words:
        return 0.0
    return unknown_words(view, conn, " ".join(words))


def unknown_names(view, conn, query: str) -> float:
    """unknown_latin with an exact, word-level test: the share of the Latin-script words (word_df.latin_words:
    "GPT-4o를" -> gpt, 4o) of a query with Hangul that no chunk holds as a whole word, read from the word
    table the index writer stores. The trigram test calls "pinecone", "faiss" and "redis" seen in a vault
    that never names them (their trigrams occur inside other words); this one does not. Kept beside
    unknown_latin rather than in its place: stored gate models read features by name, with weights fitted
    on the trigram test. An index without a current word table answers with the trigram test
    (word_df.STALE says so in `search --explain`)."""
    if not HANGUL_RE.search(query):
        return 0.0
    words = list(dict.fromkeys(word_df.latin_words(query)))[:MAX_WORDS]
    if not words:
        return 0.0
    dfs = word_df.counts(view, conn, words)
    if dfs is None:
        return unknown_words(view, conn, " ".join(words))
    return sum(dfs[w] == 0 for w in words) / len(words)


def content_words(query: str) -> list[str]:
    """The query's content words in order, without repeats, at most CONTENT_WORDS: runs as the n-gram lists cut
    them (ngram_postings.terms_of: Hangul against letters and digits, lower-cased), a Hangul run without its
    particle (PARTICLES), each 2+ characters."""
    out = []
    for w in ngram_postings.RUN_RE.findall(query.lower()):
        if ngram_postings.HANGUL_RE.match(w):
            w = next((w[:-len(p)] for p in PARTICLES if w.endswith(p) and len(w) - len(p) >= 2), w)
        if len(w) >= 2 and w not in out:
            out.append(w)
    return out[:CONTENT_WORDS]


def word_note_df(index, word: str, held=None) -> int:
    """How many notes hold every n-gram of `word` (its n-gram posting lists intersected over notes), the
    notes numbered in `held` (an array of note numbers: the notes a search holds out) left out."""
    terms = list(dict.fromkeys(ngram_postings.terms_of(word)))
    found = index.term_lists(terms)
    if not terms or len(found) < len(terms):
        return 0
    lists = sorted((t.note_no for t in found), key=len)
    common = lists[0]
    for other in lists[1:]:
        common = np.intersect1d(common, other, assume_unique=True)
        if not len(common):
            return 0
    if held is not None and len(held):
        common = np.setdiff1d(common, held, assume_unique=True)
    return int(len(common))


def word_tf_in_note(index, word: str, note_no: int) -> int:
    """How many times note number `note_no` holds `word`, as far as its n-gram counts tell: the fewest of any
    of its n-grams (0 when the note lacks one)."""
    terms = list(dict.fromkeys(ngram_postings.terms_of(word)))
    found = index.term_lists(terms)
    if not terms or len(found) < len(terms):
        return 0
    tf = None
    for t in found:
        k = int(np.searchsorted(t.note_no, note_no))
        n = int(t.note_tf[k]) if k < len(t.note_no) and t.note_no[k] == note_no else 0
        tf = n if tf is None else min(tf, n)
        if not tf:
            return 0
    return tf


def word_stem(word: str) -> str:
    """A Hangul word's first two syllables (where an inflected form keeps its stem: 느렸던 -> 느렸), any other
    word itself."""
    return word[:2] if len(word) > 2 and ngram_postings.HANGUL_RE.match(word) else word


BM25_K1, BM25_B = 1.2, 0.75     # note_word_tf_idf's saturation: BM25's usual constants


def _word_features(f: dict, index, query: str, top_doc: str | None, held: frozenset,
                   top_heading: str | None = None, top_note_no: int | None = None) -> None:
    """unseen_words ... rarest_in_heading and NOTE_WORD_FEATURES (FEATURES), into `f`; `top_doc` is the first
    result's chunk text (title, heading path, text), None with no result, `top_heading` its title, aliases and
    heading path, `top_note_no` its note's number in `index`; `held` the note ids the search holds out: a word
    only they hold is unseen, as it would be in the vault without them."""
    words = content_words(query)
    if not words:
        return
    drop = np.array([i for i, nid in enumerate(index.note_ids) if nid in held], np.int32) if held else None
    n = max(len(index.note_ids) - (len(drop) if drop is not None else 0), 1)
    dfs = [word_note_df(index, w, drop) for w in words]
    f["unseen_words"] = sum(d == 0 for d in dfs) / len(words)
    f["unseen_any"] = float(any(d == 0 for d in dfs))
    f["unseen_stems"] = sum(d == 0 and (word_stem(w) == w or word_note_df(index, word_stem(w), drop) == 0)
                            for w, d in zip(words, dfs)) / len(words)
    idf = [_idf(n, d) for d in dfs]
    if top_note_no is not None:
        tfs = [word_tf_in_note(index, w, top_note_no) if d else 0 for w, d in zip(words, dfs)]
        f["note_word_coverage_idf"] = sum(i for i, t in zip(idf, tfs) if t) / sum(idf)
        k = BM25_K1 * (1 - BM25_B + BM25_B * float(index.note_len[top_note_no]) / max(index.avg_note_len, 1e-9))
        f["note_word_tf_idf"] = sum(i * t / (t + k) for i, t in zip(idf, tfs)) / sum(idf)
    if top_doc is None:
        return
    low = top_doc.lower()
    inside = [w in low for w in words]
    f["word_coverage"] = sum(inside) / len(words)
    f["word_coverage_idf"] = sum(i for i, x in zip(idf, inside) if x) / sum(idf)
    f["rarest_in_top"] = float(inside[int(np.argmin(dfs))])
    if top_heading is not None:
        head = top_heading.lower()
        named = [w in head for w in words]
        f["heading_word_coverage_idf"] = sum(i for i, x in zip(idf, named) if x) / sum(idf)
        f["rarest_in_heading"] = float(named[int(np.argmin(dfs))])


def _ngram_features(f: dict, index, query: str, ngram: list, dense: list, hits) -> None:
    """ngram_rank_inv ... ngram_top_norm (FEATURES), into `f`, from the n-gram BM25 list the search ran."""
    if not ngram:
        return
    top = hits[0].note_id if hits else None
    f["ngram_rank_inv"] = next((1.0 / (i + 1) for i, h in enumerate(ngram[:RANK_DEPTH]) if h.note_id == top), 0.0)
    f["ngram_top1_dense"] = float(bool(dense) and dense[0].note_id == ngram[0].note_id)
    s1 = ngram[0].score
    f["ngram_margin_ratio"] = ((s1 - ngram[1].score) / s1 if len(ngram) >= 2 else 1.0) if s1 > 0 else 0.0
    terms = list(dict.fromkeys(ngram_postings.terms_of(query)))
    found = index.term_lists(terms)
    n = max(len(index.note_ids), 1)
    total = sum(_idf(n, len(t.note_no)) for t in found) + \
        (len(terms) - len(found)) * _idf(n, 0)
    f["ngram_top_norm"] = s1 / total if total > 0 else 0.0


def _chunk_doc(view, conn, hit) -> tuple[str, str | None]:
    """(title + heading path + text of `hit`'s chunk, its heading path): one row by primary key."""
    note = view.notes.get(hit.note_id, {})
    text, heading = "", None
    if conn is not None and hit.chunk_id is not None:
        try:
            row = conn.execute("SELECT context, text FROM chunks WHERE id = ?", (hit.chunk_id,)).fetchone()
        except DB_ERRORS:
            row = None
        if row:
            text, heading = f"{row[0]}\n{row[1]}", row[0]
    return f"{note.get('title', '')}\n{text}", heading


def _scale_free(f: dict, lists: dict, hits, d: list, sp: list) -> None:
    """The within-query ranks and ratios (FEATURES: dense_rank_inv ... bm25_margin_ratio), into `f`."""
    top = hits[0].note_id if hits else None
    for ch in ("dense", "sparse"):
        f[f"{ch}_rank_inv"] = next((1.0 / (i + 1) for i, h in enumerate(lists.get(ch, [])[:RANK_DEPTH])
                                    if h.note_id == top), 0.0)
    if len(d) >= 3 and d[0] > d[-1]:
        f["cos_margin_ratio"] = (d[0] - d[1]) / (d[0] - d[-1])
    sd = float(np.std(d)) if len(d) >= 3 else 0.0
    if sd > 0:
        f["cos_z10"] = (d[0] - float(np.mean(d))) / sd
    if sp and sp[0] > 0:
        f["bm25_ratio2"] = sp[1] / sp[0] if len(sp) >= 2 else 0.0
        f["bm25_wig_ratio"] = (sp[0] - sum(sp) / TOP_K) / sp[0]
        f["bm25_margin_ratio"] = (sp[0] - sp[1]) / sp[0] if len(sp) >= 2 else 1.0
    elif sp:
        f["bm25_margin_ratio"] = 1.0


def script_mix(query: str) -> tuple[float, float]:
    letters = [c for c in query if c.isalpha()]
    if not letters:
        return 0.0, 0.0
    s = "".join(letters)
    return len(HANGUL_RE.findall(s)) / len(letters), len(LATIN_RE.findall(s)) / len(letters)


def gate_features(query: str, lists: dict, hits, view, *, conn=None, top_text: str | None = None,
                  reranked: bool = False, held: frozenset = frozenset(),
                  only: frozenset | None = None) -> dict[str, float]:
    """name -> value for every name in FEATURES, or with `only` (features_read) for those and ALWAYS: the
    lookups no asked-for feature needs are not made. `lists` is Retrieval.lists (channel -> ChannelHit list),
    `hits` the final results (objects with note_id, score, cosine, chunk_id). `top_text` is the first
    result's chunk text (read from conn when not given). `held`: the notes this search holds out (already
    dropped from `lists`); the content-word features read the vault without them."""
    def want(*names) -> bool:
        return only is None or any(n in only for n in names)

    dense = [h.score for h in lists.get("dense", [])]
    sparse = lists.get("sparse", [])
    top = dense[0] if dense else 0.0
    top10 = np.asarray(dense[:TOP_K], dtype=np.float64)
    f = dict.fromkeys(FEATURE_NAMES, 0.0)
    f["top_cos"] = top
    f["hit_cos"] = float(hits[0].cosine) if hits else 0.0
    f["cos_margin"] = dense[0] - dense[1] if len(dense) >= 2 else 0.0
    f["cos_wig"] = float(top - top10.mean()) if len(top10) else 0.0
    f["cos_spread"] = float(top10.std()) if len(top10) else 0.0
    f["sparse_found"] = float(bool(sparse))
    if sparse and want("bm25_top_norm", "bm25_wig"):
        idf = query_idf(view, conn, query)
        f["bm25_top_norm"] = sparse[0].score / idf if idf > 0 else 0.0
        # WIG on the lexical side (Zhou & Croft 2007): a note that matches nothing scores 0, so a list
        # shorter than TOP_K is padded with zeros, not averaged over what it has
        s10 = [h.score for h in sparse[:TOP_K]]
        f["bm25_wig"] = (s10[0] - sum(s10) / TOP_K) / idf if idf > 0 else 0.0
    _scale_free(f, lists, hits, dense[:TOP_K], [h.score for h in sparse[:TOP_K]])
    d5 = [h.note_id for h in lists.get("dense", [])[:AGREE_K]]
    s5 = {h.note_id for h in sparse[:AGREE_K]}
    f["dense_sparse_agree"] = sum(n in s5 for n in d5) / AGREE_K if d5 else 0.0
    f["top1_agree"] = float(bool(d5) and bool(sparse) and d5[0] == sparse[0].note_id)
    f["entity_found"] = float(bool(lists.get("entity")))
    for name, fn in (("unknown_words", unknown_words), ("unknown_latin", unknown_latin), ("unknown_names", unknown_names)):
        if want(name):
            f[name] = fn(view, conn, query)
    # fifth round: the same IDF-weighted overlap on each channel's own top chunk. The fused first result
    # moves with the fusion's rrf_k (at k = 2 it is more often one channel's top than the other's); these
    # two do not depend on the fusion at all, so the gate sees both channels' best evidence whatever k is.
    docs = {}                                   # chunk id -> (title + heading path + text, heading path)

    def doc(hit):                               # one chunk read per chunk, whichever list names it first
        key = hit.chunk_id if hit.chunk_id is not None else ("note", hit.note_id)
        if key not in docs:
            docs[key] = _chunk_doc(view, conn, hit)
        return docs[key]

    query_script = script_mix(query)            # (Hangul share, Latin share) of the query's letters
    for ch in ("dense", "sparse"):
        top_hit = (lists.get(ch) or [None])[0]
        if top_hit is not None:
            if want(f"{ch}_idf_overlap"):
                f[f"{ch}_idf_overlap"] = idf_overlap(view, conn, query, doc(top_hit)[0])
            if ch == "dense":
                f["script_gap"] = abs(query_script[0] - script_mix(doc(top_hit)[0])[0])
    cross = float(f["script_gap"] > CROSS_SCRIPT_GAP)
    f["cross_script"] = cross
    for name in ("cos_z10", "dense_rank_inv", "cos_margin_ratio"):
        f[f"cross_script_{name}"] = cross * f[name]
    top_doc = top_heading = None
    if hits:
        h0 = hits[0]
        note = view.notes.get(h0.note_id, {})
        if top_text is not None:
            top_doc, heading = f"{note.get('title', '')}\n{top_text}", None
        else:
            top_doc, heading = doc(h0)
        if want("term_overlap"):
            f["term_overlap"] = term_overlap(query, top_doc)
        if want("idf_overlap"):
            f["idf_overlap"] = idf_overlap(view, conn, query, top_doc)
        # a note ABOUT the query's subject names it in its metadata; a near-topic note mentions it in passing
        if want("meta_overlap"):
            meta = "\n".join([note.get("title", ""), *note.get("aliases", []), *note.get("tags", []),
                              note.get("summary", "")])
            f["meta_overlap"] = idf_overlap(view, conn, query, meta)
        # a section ABOUT the query's subject names it in its heading path (the title-and-heading fields of
        # BM25F-style retrieval); the chunk's context is "title > section > subsection"
        if want("heading_overlap"):
            f["heading_overlap"] = idf_overlap(view, conn, query, heading if heading is not None else note.get("title", ""))
        top_heading = "\n".join([note.get("title", ""), *note.get("aliases", []), heading or ""])
        if want("title_match"):
            qnorm = normalize_name(query)
            names = [note.get("title", "")] + list(note.get("aliases", []))
            f["title_match"] = float(any(len(n) >= 2 and n in qnorm for n in map(normalize_name, names)))
        if reranked:
            f["rerank_top"] = float(h0.score)
    index = view.ngram_index()
    if index is not None:
        if want(*WORD_FEATURES, *HEADING_WORD_FEATURES, *NOTE_WORD_FEATURES):
            top_no = None
            if hits and want(*NOTE_WORD_FEATURES) and hits[0].chunk_id is not None:
                place = int(view.place_of[hits[0].chunk_id]) if 0 <= hits[0].chunk_id < len(view.place_of) else -1
                top_no = int(index.note_of_place[place]) if place >= 0 else None
            _word_features(f, index, query, top_doc, frozenset(held), top_heading, top_no)
        if want(*NGRAM_FEATURES):
            _ngram_features(f, index, query, lists.get(NGRAM_LIST, []), lists.get("dense", []), hits)
    f["reranked"] = float(reranked)
    f["query_chars"] = math.log1p(len(query))
    f["hangul_share"], f["latin_share"] = query_script
    return {k: float(v) for k, v in f.items() if only is None or k in only or k in ALWAYS}
