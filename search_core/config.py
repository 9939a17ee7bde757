"""Every knob the tuner may turn, in one frozen object with a stable hash."""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from pathlib import Path

from search_core import SearchCoreError
from search_core.hashing import hash_json

CHANNELS = ("dense", "sparse", "decomposed", "entity")
# the n-gram BM25 list fused beside the channels' (SearchConfig.w_ngram); the sparse channel runs it
NGRAM_LIST = "ngram"


@dataclass(frozen=True)
class ChunkConfig:
    """Chunking parameters; part of the index fingerprint (changing them needs --full)."""

    target_chars: int = 500   # the size our users' recall path was tuned for
    max_chars: int = 800      # a paragraph longer than this is split on sentence ends
    min_chars: int = 80       # a trailing scrap shorter than this joins its neighbour
    # Dense vectors per note (0 = every chunk). e5-small embeds ~8 chunks/s on 2 cores, so the
    # 18,315 chunks of the 974-note johngrib wiki would take ~38 min; 8 per note (the first 4, then 4
    # spread over the rest) is 6,016 chunks, ~12.5 min. Every chunk stays in the BM25 index either way.
    dense_per_note: int = 8

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_flags(cls, chunk_chars: int | None, dense_per_note: int | None) -> ChunkConfig | None:
        """The chunking `index --chunk-chars N --dense-per-note M` asks for; None when neither is given
        (the index keeps its own). A paragraph may grow to 1.6 x the target before it is split, as the
        defaults do (500 -> 800)."""
        if chunk_chars is None and dense_per_note is None:
            return None
        base = cls()
        return cls(target_chars=chunk_chars or base.target_chars,
                   max_chars=max(base.max_chars, int((chunk_chars or 0) * 1.6)),
                   min_chars=base.min_chars,
                   dense_per_note=base.dense_per_note if dense_per_note is None else dense_per_note)

    @classmethod
    def flags_for(cls, chunking: dict) -> str:
        """The `index` options that produce this chunking (the inverse of from_flags)."""
        base = cls()
        flags = ""
        if chunking.get("target_chars", base.target_chars) != base.target_chars:
            flags += f" --chunk-chars {chunking['target_chars']}"
        if chunking.get("dense_per_note", base.dense_per_note) != base.dense_per_note:
            flags += f" --dense-per-note {chunking['dense_per_note']}"
        return flags


# Settings added after configs were first recorded, with the value every config had before each existed: a
# recorded config lacking one ran with that value (SearchConfig.from_stored), and a config holding it keeps its
# old hash (SearchConfig.config_hash).
ADDED_LATER = {"gate_threshold": None, "fast_path_margin": None, "keyword_index": "fts5", "pair_terms": 0,
               "w_ngram": 0.0, "ngram_lead_margin": None, "w_ngram_lead": 0.20, "cross_lead_margin": None,
               "w_dense_cross": 0.50, "dense_lead_cos": None, "w_dense_lead": 0.45}


# "MOC" (map of content) as a word of the note's id, in any case: `MOC`, `Java MOC`, `moc-java`, `maps/MOC 자바`.
# fnmatch has no word boundary, so a non-letter on each side stands for one. `*moc*` kept every note whose name
# holds the letters out of every answer list: `mockito`, `kotlin-mockk`, `test-detroit-mockist` (8 notes on
# our wikis, among them the gold note of an aegis1920 question that all three lists put first).
MOC_GLOBS = ("[Mm][Oo][Cc]", "[Mm][Oo][Cc][!A-Za-z]*", "*[!A-Za-z][Mm][Oo][Cc]", "*[!A-Za-z][Mm][Oo][Cc][!A-Za-z]*")
NAV_GLOBS = ("index", "*/index", "home", *MOC_GLOBS)
# Earlier defaults as a promoted config file wrote them out in full: a config file holding one exactly is read
# with today's (load_config); a ledger's recorded config keeps what it ran (SearchConfig.from_stored).
SUPERSEDED_NAV_GLOBS = (("index", "*/index", "home", "*MOC*", "*moc*"),)


@dataclass(frozen=True)
class SearchConfig:
    # Weights are the ones our users run today (dense .30 sparse .40 decomposed .15 entity .15).
    w_dense: float = 0.30
    w_sparse: float = 0.40
    w_decomposed: float = 0.15
    w_entity: float = 0.15
    # The n-gram BM25 list of the query (search_core/index/ngram_postings.py), fused as a list of its own beside
    # the sparse channel's: FTS5 trigrams and the n-gram BM25 see Korean stems and code words differently, and
    # each wins on sets where the other is blind. 0.10 by the default rule (no tuning part worse on hit@5 or
    # MRR, the mean better, every holdout at or above): tuning MRR +0.015 AutoRAG-ko, +0.008 johngrib, +0.003
    # KorQuAD, demo equal; 0.20 lost johngrib-tune MRR (BENCHMARKS.md, peers). 0: not run.
    w_ngram: float = 0.10
    # ...and its weight when it leads: its first note's score ahead of the second's by at least
    # ngram_lead_margin of itself (as the list came from the channel; channels.lead_margin). A list that
    # decides so rarely puts a wrong note first (the fast path's measure), and on the KorQuAD sample, whose
    # misses are other paragraphs of the gold article, it is right where the fusion is not. 0.20 at 0.2 by the
    # default rule: KorQuAD tuning MRR 0.973 -> 0.978, every other tuning part equal, every holdout at or above
    # (docs/lab-notes/peers-2026-12.md). None: w_ngram always; w_ngram 0 turns both off.
    ngram_lead_margin: float | None = 0.2
    w_ngram_lead: float = 0.20
    # The dense weight for a question asked across scripts: the keyword lists undecided (the n-gram list's
    # lead below cross_lead_margin) and each of the dense list's first notes written in the other script
    # (search_core/search/scripts.py: a Korean question about English notes, or the other way round), or an
    # English question whose dense list's first note is Korean and in no keyword list's first 10
    # (scripts.alone_across). The meaning is
    # then the one channel that crosses; the keywords match words the question shares with other notes. 0.50
    # at 0.1 by the default rule: baekjungho-tune hit@5 0.933 -> 0.967, MRR +0.016, johngrib-tune MRR +0.013,
    # every other tuning part equal, every holdout at or above (docs/lab-notes/peers-2026-12.md). None: w_dense;
    # a config with w_dense 0 fuses no dense list, across scripts or not.
    cross_lead_margin: float | None = 0.1
    w_dense_cross: float = 0.50
    # The dense list weighs at least w_dense_lead when its first note's cosine leads the second's by
    # dense_lead_cos or more: the meaning points at one note, and a keyword list's first note (0.40 / (k + 1)
    # at k = 2) no longer outranks it by default. 0.45 at 0.015 by the default rule: johngrib-tune MRR 0.933 ->
    # 0.946, every other tuning part equal, every holdout at or above (johngrib final and week up); 0.01 lost
    # KorQuAD's holdout, 0.6 its tune half (docs/lab-notes/peers-2026-12.md). None: off; a config with w_dense
    # 0 fuses no dense list, leading or not.
    dense_lead_cos: float | None = 0.015
    w_dense_lead: float = 0.45
    # k = 2, chosen by the tuner (benchmarks/bench_default_k.py): rrf_k sweeps moved 60 to 5 (demo), 1
    # (AutoRAG-ko) and 2 (KorQuAD); k = 2 had the best mean tuning score losing no tuning hit, and held on
    # all three holdouts (hit@5 48/48 -> 48/48, 55/56 -> 56/56, 584/600 -> 593/600; no metric worse).
    # With k = 60 a note ranked 1st by one channel and missing from another lost to notes every channel
    # ranked 2nd-3rd. BENCHMARKS.md, "A default chosen by evidence".
    rrf_k: int = 2
    community_boost: float = 0.0   # added to a note's fused score when it shares the top note's community
    depth: int = 50                # candidates each channel returns
    rerank_depth: int = 20         # fused candidates handed to the reranker
    top_k: int = 5
    threshold: float | None = None  # None: the embedder's own default (score scales differ per model)
    # the gate model's probability threshold (inject when P(answerable) >= it); None: the model's own,
    # fitted with it. The cosine `threshold` above only decides when no gate model fits the index.
    gate_threshold: float | None = None
    embedder: str = "e5-small"
    # the sparse channel's index: "ngram" = BM25 over character 2-3-grams of Hangul words and whole other
    # words, one document per note (search_core/index/ngram_postings.py); "fts5" = FTS5 trigrams plus the
    # short-token scan for 1-2 character words; "both" = the two lists fused by RRF. BENCHMARKS.md, peers, has the two side by side.
    keyword_index: str = "fts5"
    # The fast path: a query the keyword lists decide is answered from them without embedding it. The n-gram
    # and FTS5 lists must put the same note first and the n-gram BM25 top score must lead the second by at
    # least this share of itself (search_core.search.channels.KeywordEvidence); None: every query runs every
    # channel. Off until a vault's own probes say it does not answer questions the vault cannot (BENCHMARKS.md,
    # the fast path: 0.2 was chosen on the tuning sets).
    fast_path_margin: float | None = None
    # Query expansion by the terms the vault pairs across scripts (`지연 시간(latency)`): up to this many Korean
    # terms the vault pairs with the query's Latin phrases are added to the query the channels read
    # (search_core.ingest.term_pairs); 0 = none. 2 chosen on the tuning sets (cross-lingual hit@5 on johngrib's
    # 0.857 -> 0.905, no level worse), held on the holdouts (BENCHMARKS.md, cross-lingual questions).
    pair_terms: int = 2
    reranker: str = "none"
    exclude_nav: bool = True       # index/MOC notes never appear in results
    nav_globs: tuple[str, ...] = NAV_GLOBS

    def weights(self, ngram_lead: float = 0.0, cross_script: bool = False, alone_across: bool = False,
                dense_lead: float = 0.0) -> dict[str, float]:
        """Each list's weight in the fusion: the four channels', and the n-gram list's (Retrieval.lists["ngram"]),
        w_ngram_lead when that list's lead (`ngram_lead`, channels.lead_margin) reaches ngram_lead_margin. A
        config with w_ngram 0 fuses no n-gram list, leading or not (the demo's start, bench_peers' `fts5`).
        The dense list weighs w_dense_cross when the question is asked across scripts (`cross_script`,
        scripts.cross_script) and the n-gram lead is below cross_lead_margin, or when its first note is on the
        other side of the scripts and in no keyword list's first notes (`alone_across`, scripts.alone_across),
        whatever the lead; cross_lead_margin None or w_dense 0 turns both off. It weighs at least w_dense_lead
        when its first note's cosine leads the second's by dense_lead_cos (`dense_lead`, channels.cosine_lead)."""
        leads = self.ngram_lead_margin is not None and self.w_ngram > 0 and ngram_lead >= self.ngram_lead_margin
        out = {**{c: getattr(self, f"w_{c}") for c in CHANNELS}, NGRAM_LIST: self.w_ngram_lead if leads else self.w_ngram}
        if self.crosses(ngram_lead, cross_script) or (alone_across and self.weighs_across()):
            out["dense"] = self.w_dense_cross
        if self.dense_lead_cos is not None and self.w_dense > 0 and dense_lead >= self.dense_lead_cos:
            out["dense"] = max(out["dense"], self.w_dense_lead)
        return out

    def crosses(self, ngram_lead: float, cross_script: bool) -> bool:
        """Whether the dense list weighs w_dense_cross: a question across scripts the keywords do not decide."""
        return cross_script and self.weighs_across() and ngram_lead < self.cross_lead_margin

    def weighs_across(self) -> bool:
        """Whether the cross-script rule is on: cross_lead_margin set, and the dense list fused at all (a config
        with w_dense 0 turned the channel off; the rule would fuse it back for cross-script questions alone)."""
        return self.cross_lead_margin is not None and self.w_dense > 0

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["nav_globs"] = list(self.nav_globs)
        return d

    def config_hash(self) -> str:
        """A short hash of every setting; a key added later (ADDED_LATER) that holds the value every config
        had before it existed is left out, so a config recorded before it keeps its hash."""
        d = {k: v for k, v in self.as_dict().items() if not (k in ADDED_LATER and v == ADDED_LATER[k])}
        return hash_json(d, 12)

    @classmethod
    def from_stored(cls, d: dict) -> "SearchConfig":
        """A config as a ledger or a promotion recorded it. A key added since it was recorded takes the value
        that reproduces what it ran (ADDED_LATER), not today's default: a sweep's start recorded before the
        n-gram list existed ran without it."""
        return cls().replace(**{**{k: v for k, v in ADDED_LATER.items() if k not in d}, **d})

    def replace(self, **changes) -> "SearchConfig":
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise SearchCoreError(
                f"unknown config key(s) {sorted(unknown)}; valid keys: {sorted(self.as_dict())}")
        if "nav_globs" in changes:
            changes["nav_globs"] = tuple(changes["nav_globs"])
        return dataclasses.replace(self, **changes)


def read_toml(path: str | Path, what: str = "config file") -> dict:
    """A TOML file as a dict; a missing or malformed file is a SearchCoreError that names it."""
    p = Path(path)
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SearchCoreError(f"{what} {p} does not exist") from None
    except IsADirectoryError:
        raise SearchCoreError(f"{what} {p} is a folder, not a file") from None
    except UnicodeDecodeError as e:
        raise SearchCoreError(f"{what} {p} is not UTF-8 (byte {e.start}: {e.reason}); TOML files are UTF-8: "
                              "re-save it as UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise SearchCoreError(f"{what} {p} is not valid TOML: {e}") from None


def load_config(path: str | Path | None, base: SearchConfig | None = None) -> SearchConfig:
    """Read a TOML file (flat keys, or under [search]) onto the defaults. The active config (a file with an
    [active] table, written whole by promotion) is a recorded config: a key it lacks was added after it was
    written, and takes the value it ran with (SearchConfig.from_stored), not today's default."""
    if path is None:
        return base or SearchConfig()
    from search_core.validate import Where, check_search_values
    data = read_toml(path)
    base = base or (SearchConfig.from_stored({}) if isinstance(data.get("active"), dict) else SearchConfig())
    where = Where(str(path), "[search]" if "search" in data else "")
    if "search" in data:
        data = where.table_of(data["search"], "[search]")
    else:
        data = {k: v for k, v in data.items() if not isinstance(v, dict)}   # other tables ([score]) are not ours
    where.known_keys(data, [f.name for f in dataclasses.fields(SearchConfig)])
    values = check_search_values(data, where)
    if tuple(values.get("nav_globs", ())) in SUPERSEDED_NAV_GLOBS:   # an old default written out, not a choice
        values["nav_globs"] = NAV_GLOBS
    return base.replace(**values)
