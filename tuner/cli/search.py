"""The reading verbs: `search` (with --explain and --json) and `stats` over one index."""

from __future__ import annotations

import json

import click

from search_core import SearchCoreError

from tuner.cli.options import (db_error, db_option, fail, input_file, json_option, PathValue,
                               search_config_value)


def gate_reads(searcher) -> tuple[frozenset, str]:
    """The features the gate in force reads (its model's; the cosine gate reads only top_cos), and what it is."""
    model = getattr(searcher.gate_choice, "model", None)
    if model is not None:
        return frozenset(model.features), "gate model"
    return frozenset({"top_cos"}), "cosine gate"


def _print_explain(res, searcher):
    from search_core.search.limits import QUERY_EMBED_MAX_CHARS

    r = res.retrieval
    if len(r.query) > QUERY_EMBED_MAX_CHARS:
        click.echo(f"query: {len(r.query):,} characters; the embedder saw the first {QUERY_EMBED_MAX_CHARS:,} "
                   "(the model reads at most 512 tokens; sub-questions are split from them too), sparse and entity "
                   "channels saw all of it")
    if r.subqueries:
        click.echo(f"sub-questions: {' | '.join(r.subqueries)}")
    for c, hits in r.lists.items():
        click.echo(f"\n[{c}] {len(hits)} notes" + ("" if hits else "  (nothing)"))
        for i, h in enumerate(hits[:10], 1):
            click.echo(f"  {i:>2}. {h.note_id}  ({h.score:.4f})")
    if res.held_out:
        click.echo(f"\nheld out as index pages ({len(res.held_out)}; `exclude_nav = false` lets them in):")
        for nid, why in res.held_out[:10]:
            click.echo(f"  {nid}  ({why})")
    if res.named:
        click.echo(f"\nindex pages the query names, kept and put first: {', '.join(res.named)}")
    click.echo("\nfused (weighted RRF: w_c / (k + rank_c)):")
    for f in res.fused[:10]:
        terms = " + ".join(f"{c} {v:.5f}" for c, v in f.terms.items())
        click.echo(f"  {f.score:.5f} = {terms}   {f.id}")
    g = res.gate
    p = "-" if g.probability is None else f"{g.probability:.3f}"
    click.echo(f"\ngate ({g.kind}; {g.reason}): P(answerable) {p}, band {g.band}")
    model = getattr(searcher.gate_choice, "model", None)
    if model is not None:
        click.echo(f"  calibration: {model.provenance()}")
    read, whose = gate_reads(searcher)
    click.echo(f"  {len(g.features)} features computed; * marks the {sum(n in read for n in g.features)} "
               f"the {whose} reads")
    for name, value in g.features.items():
        click.echo(f"  {'*' if name in read else ' '} {name:<20} {value:.4f}")
    from search_core.index import word_df
    if not word_df.is_current(searcher.conn):      # an older index: unknown_names used the trigram test
        click.echo(f"  ({word_df.STALE})")
    from search_core.gate.features import NGRAM_STALE
    from search_core.index import ngram_postings
    if not ngram_postings.is_built(searcher.conn):  # an older index: the content-word features read 0
        click.echo(f"  ({NGRAM_STALE})")


@click.command()
@click.argument("query")
@db_option("The index file. Default: the active config's index, else the index `index` built last.", required=False)
@click.option("-k", "top_k", type=click.IntRange(min=1), default=None, help="How many results (default 5).")
@click.option("--embedder", default=None, help="Must match the index's embedder.")
@click.option("--reranker", default=None, help="Reranker name, or none.")
@click.option("--config", "config_path", type=PathValue(), default=None, callback=search_config_value,
              help="A TOML config.")
@json_option()
@click.option("--explain", is_flag=True, help="Show each channel's list and the fused arithmetic.")
@click.option("--gate", "gate_path", type=input_file(), default=None,
              help="A gate model file (default: <db>.gate.json, else the shipped default model).")
def search(query, db, top_k, embedder, reranker, config_path, as_json, explain, gate_path):
    """Search the index in --db for QUERY."""
    from search_core.search.limits import repair_surrogates
    from search_core.gate.request import GateRequest
    from search_core.search.pipeline import Searcher

    query, n_bad = repair_surrogates(query)
    if n_bad:
        click.echo(f"warning: the query had {n_bad} byte(s) that are not UTF-8; searched with U+FFFD in their place "
                   "(set your terminal to UTF-8)", err=True)
    try:
        from tuner.promotion.promote import resolve_search_config
        db, base_cfg = resolve_search_config(db, config_path)   # no --config: runs/active.toml
        searcher = Searcher(db, embedder=embedder, gate=GateRequest(path=gate_path))
        cfg = base_cfg.replace(embedder=searcher.embedder_name)
        if top_k is not None:
            cfg = cfg.replace(top_k=top_k)
        if reranker is not None:
            cfg = cfg.replace(reranker=reranker)
        res = searcher.search(query, cfg)
    except SearchCoreError as e:
        fail(e)
    except db_error() as e:
        from tuner.cli.check import damaged_index_message
        fail(damaged_index_message(db, e))
    if as_json:
        click.echo(json.dumps(res.as_dict(), ensure_ascii=False, indent=2))
        return
    if explain:
        _print_explain(res, searcher)
        click.echo("")
    if not res.hits:
        click.echo("no results")
    for i, h in enumerate(res.hits, 1):
        ranks = " ".join(f"{c[0]}{r}" for c, r in h.channels.items() if r)
        click.echo(f"{i}. {h.title}  [{h.note_id}]  score {h.score:.4f}  cos {h.cosine:.3f}  ({ranks})")
        click.echo(f"   {h.snippet}")
    g = res.gate
    why = (f"P(answerable) {g.probability:.3f}" if g.probability is not None else
           f"top cosine {g.top_score:.3f} vs threshold {g.threshold:.3f}")
    click.echo(f"\ngate: {'inject' if g.inject else 'hold back'} ({why}), band {g.band}, confidence {res.confidence}; "
               f"{res.timings_ms['total']:.0f} ms")


@click.command()
@db_option()
@json_option()
def stats(db, as_json):
    """What is in an index: counts, fingerprint, vault, schema."""
    from search_core.index.check import check_index
    from search_core.index.stats import index_stats

    try:
        s = index_stats(db)
        # counts read off a damaged file look fine ("138 notes"); the quick check (quick_check + every
        # vector read, no model, < 0.1 s on the demo index) says whether they can be trusted
        report = check_index(db, quick=True)
    except SearchCoreError as e:
        fail(e)
    except db_error() as e:
        from tuner.cli.check import damaged_index_message
        fail(damaged_index_message(db, e))
    if not report.ok:
        fail(SearchCoreError(report.message()))
    if as_json:
        click.echo(json.dumps(s, ensure_ascii=False, indent=2))
        return
    for k, v in s.items():
        click.echo(f"{k:<18} {json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v}")


COMMANDS = (search, stats)
