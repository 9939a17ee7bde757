"""The `autoresearch` command line: thin verbs over search_core and tuner."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from search_core import SearchCoreError

DEMO_VAULT = Path(__file__).resolve().parent.parent / "experiments" / "demo-vault"


def _sigterm_as_interrupt():
    """`kill PID` ends an index run the way Ctrl-C does: transaction rolled back, temp file removed."""
    import signal

    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _fail(e: Exception):
    raise click.ClickException(str(e))


class _Progress:
    """tqdm bars per stage on stderr; silent when stderr is not a terminal unless forced."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.bars = {}

    def __call__(self, stage, done, total):
        if not self.enabled:
            return
        from tqdm import tqdm
        bar = self.bars.get(stage)
        if bar is None:
            bar = self.bars[stage] = tqdm(total=total, desc=f"{stage:<8}", unit=" items", file=sys.stderr,
                                          leave=True, dynamic_ncols=True)
        if stage == "parse":
            bar.n = done
            bar.refresh()
        else:
            bar.total = total
            bar.n = done
            bar.refresh()

    def close(self):
        for b in self.bars.values():
            b.close()


@click.group()
@click.version_option(package_name="autoresearch")
def main():
    """Local hybrid search over a markdown vault, and the tuner that sets its knobs by experiment."""


@main.command()
@click.argument("vault", type=click.Path(path_type=Path))
@click.option("--db", required=True, type=click.Path(path_type=Path), help="The index file (SQLite).")
@click.option("--embedder", default=None, help="Embedder name (default: the index's, or e5-small for a new index).")
@click.option("--full", is_flag=True, help="Rebuild from scratch into a new file, swapped in when complete.")
@click.option("--chunk-chars", type=int, default=None, help="Target chunk size in characters (needs --full to change).")
@click.option("--dense-per-note", type=int, default=None, help="Vectors per note, 0 = every chunk (needs --full).")
@click.option("--cache", type=click.Path(path_type=Path), default=None, help="Embedding cache file.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: when stderr is a terminal).")
def index(vault, db, embedder, full, chunk_chars, dense_per_note, cache, as_json, progress):
    """Index VAULT (a folder of .md notes, or a BEIR corpus folder) into --db."""
    from search_core.config import ChunkConfig
    from search_core.indexer import index_vault

    chunk_cfg = None
    if chunk_chars is not None or dense_per_note is not None:
        base = ChunkConfig()
        chunk_cfg = ChunkConfig(target_chars=chunk_chars or base.target_chars,
                                max_chars=max(base.max_chars, int((chunk_chars or 0) * 1.6)),
                                min_chars=base.min_chars,
                                dense_per_note=base.dense_per_note if dense_per_note is None else dense_per_note)
    bars = _Progress(sys.stderr.isatty() if progress is None else progress)
    _sigterm_as_interrupt()
    try:
        report = index_vault(vault, db, embedder=embedder, full=full, chunk_cfg=chunk_cfg, cache=cache,
                             progress=bars)
    except SearchCoreError as e:
        bars.close()
        _fail(e)
    except KeyboardInterrupt:
        bars.close()
        click.echo(f"\ninterrupted: {db} is unchanged (the old index stays usable); embeddings computed so far "
                   "are kept in the cache, so running the same command again resumes quickly", err=True)
        sys.exit(130)
    bars.close()
    if as_json:
        click.echo(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
        return
    click.echo(f"{report.mode} index of {vault} -> {db}: {report.notes} notes, {report.chunks} chunks "
               f"(+{report.added} ~{report.changed} -{report.deleted}, {report.unchanged} unchanged), "
               f"{report.embedded} embedded, {report.seconds:.1f}s")
    for s in report.skipped:
        click.echo(f"skipped {s.path}: {s.reason}", err=True)
    for w in report.warnings:
        click.echo(f"warning {w}", err=True)


def _print_explain(res, searcher):
    r = res.retrieval
    if r.subqueries:
        click.echo(f"sub-questions: {' | '.join(r.subqueries)}")
    for c, hits in r.lists.items():
        click.echo(f"\n[{c}] {len(hits)} notes" + ("" if hits else "  (nothing)"))
        for i, h in enumerate(hits[:10], 1):
            click.echo(f"  {i:>2}. {h.note_id}  ({h.score:.4f})")
    click.echo("\nfused (weighted RRF: w_c / (k + rank_c)):")
    for f in res.fused[:10]:
        terms = " + ".join(f"{c} {v:.5f}" for c, v in f.terms.items())
        click.echo(f"  {f.score:.5f} = {terms}   {f.id}")


@main.command()
@click.argument("query")
@click.option("--db", required=True, type=click.Path(path_type=Path))
@click.option("-k", "top_k", type=int, default=None, help="How many results (default 5).")
@click.option("--embedder", default=None, help="Must match the index's embedder.")
@click.option("--reranker", default=None, help="Reranker name, or none.")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None, help="A TOML config.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--explain", is_flag=True, help="Show each channel's list and the fused arithmetic.")
def search(query, db, top_k, embedder, reranker, config_path, as_json, explain):
    """Search the index in --db for QUERY."""
    from search_core.config import load_config
    from search_core.pipeline import Searcher

    try:
        searcher = Searcher(db, embedder=embedder)
        cfg = load_config(config_path).replace(embedder=searcher.embedder_name)
        if top_k is not None:
            cfg = cfg.replace(top_k=top_k)
        if reranker is not None:
            cfg = cfg.replace(reranker=reranker)
        res = searcher.search(query, cfg)
    except SearchCoreError as e:
        _fail(e)
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
    click.echo(f"\ngate: {'inject' if g.inject else 'hold back'} (top cosine {g.top_score:.3f} vs threshold "
               f"{g.threshold:.3f}), confidence {res.confidence}; "
               f"{res.timings_ms['total']:.0f} ms")


@main.command()
@click.option("--db", required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True)
def stats(db, as_json):
    """What is in an index: counts, fingerprint, vault, schema."""
    from search_core.stats import index_stats

    try:
        s = index_stats(db)
    except SearchCoreError as e:
        _fail(e)
    if as_json:
        click.echo(json.dumps(s, ensure_ascii=False, indent=2))
        return
    for k, v in s.items():
        click.echo(f"{k:<18} {json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v}")


DEMO_QUERIES = ("GraphRAG 커뮤니티 요약", "reranker 모델 비교", "김치찌개 레시피", "RRF k 값")


@main.command()
@click.option("--out", type=click.Path(path_type=Path), default=Path("runs/demo"), help="Where results go.")
def demo(out):
    """The main job on the embedded default: index the demo vault, then search it."""
    from search_core.indexer import index_vault
    from search_core.pipeline import Searcher

    db = out / "index.sqlite"
    try:
        report = index_vault(DEMO_VAULT, db, progress=_Progress(sys.stderr.isatty()))
        click.echo(f"indexed {report.notes} notes / {report.chunks} chunks from {DEMO_VAULT} "
                   f"into {db} in {report.seconds:.1f}s ({report.embedded} embedded now)")
        searcher = Searcher(db)
        for q in DEMO_QUERIES:
            res = searcher.search(q)
            top = res.hits[0] if res.hits else None
            click.echo(f"  {q!r}: " + (f"{top.title} [{top.note_id}] cos {top.cosine:.3f}, "
                                        f"{'inject' if res.gate.inject else 'hold back'}" if top else "no results"))
    except SearchCoreError as e:
        _fail(e)
    click.echo(f"done: index at {db}; try `autoresearch search \"...\" --db {db} --explain`")


if __name__ == "__main__":
    main()
