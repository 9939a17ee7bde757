"""The `gold` verbs: questions the vault supplies (`gold make`), labelled recall calls as gold (`gold from-log`),
and a template to write questions into (`gold init`). Thin: each calls one function of tuner.data."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

from search_core import SearchCoreError

from tuner.data.cloze import CLOZE_WORDS
from tuner.data.vault_questions import FINDABLE_WITHIN, MADE_N
from tuner.cli.options import (PathValue, duration, fail, input_file, json_option, output_file, output_folder,
                               recall_log_option, window_value)


@click.group()
def gold():
    """Gold sets without writing them all by hand: from the vault's own text, from labelled recall calls, or a template."""


@gold.command("make")
@click.argument("vault_or_db", type=PathValue(exists=True))
@click.option("--out", required=True, type=output_file(), help="The gold YAML file to write.")
@click.option("-n", "n", type=click.IntRange(min=1), default=MADE_N, show_default=True,
              help="At most this many questions, taken in turn across notes (no note fills the set).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="The same seed makes the same set.")
@click.option("--kinds", default=None,
              help="Comma-separated: anchor, heading, alias, summary, title (default: anchor,heading,alias; "
                   "summary and title questions are matched by the very field they come from).")
@click.option("--probes", "n_probes", type=click.IntRange(min=1), default=None,
              help="Also make about this many probes with `probes make` (holds notes out of a new index, "
                   "written to OUT's folder as OUT-probes/; indexes the vault).")
@click.option("--keep-link", is_flag=True,
              help="Anchor questions keep the link's own text (the recipe before; it names the gold note, which the "
                   "entity channel matches). Default: the link is left out.")
@click.option("--heading-alone", is_flag=True,
              help="Heading questions without their note's title (kept when the heading says something alone): the "
                   "title names the gold note, which the entity channel matches, but the heading alone is text the "
                   "keyword channel matches. Default: the title and the heading.")
@click.option("--kinds-in-turn", is_flag=True,
              help="Every kind takes its turn per note (the recipe before). Default: anchors first, the other kinds "
                   "fill the rest.")
@click.option("--findable-in", type=PathValue(exists=True), default=None, metavar="INDEX",
              help="Keep only the questions some fusion list alone (dense, keyword, n-gram) finds in its top "
                   "--findable-within on this index of the vault (its notes held out as each question says); "
                   "n is filled from those that pass. Default: every question.")
@click.option("--findable-within", type=click.IntRange(min=1), default=FINDABLE_WITHIN, show_default=True,
              help="The rank --findable-in's lists must find the gold note within.")
@json_option()
def gold_make(vault_or_db, out, n, seed, kinds, n_probes, keep_link, heading_alone, kinds_in_turn, findable_in,
              findable_within, as_json):
    """Questions VAULT_OR_DB answers, cut from what its author wrote about each note (no model): the words
    around links to a note in other notes (the linking note is held out of that question's search), headings,
    aliases. Read the `why` of each and prune."""
    from tuner.data.vault_questions import (DEFAULT_KINDS, MADE_ANCHOR_SHARE, MADE_HEADING_TITLE, make_probes_for,
                                            write_vault_questions)
    try:
        chosen = tuple(k.strip() for k in kinds.split(",") if k.strip()) if kinds else DEFAULT_KINDS
        command = "autoresearch " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else ""
        vq = write_vault_questions(vault_or_db, out, n=n, seed=seed, kinds=chosen, command=command,
                                   mask_link=not keep_link, anchor_share=None if kinds_in_turn else MADE_ANCHOR_SHARE,
                                   heading_title=MADE_HEADING_TITLE and not heading_alone,
                                   findable_in=findable_in, findable_within=findable_within)
        probes = make_probes_for(vq, out, n_probes, seed=seed) if n_probes else None
    except SearchCoreError as e:
        fail(e)
    if as_json:
        click.echo(json.dumps({"out": str(out), "questions": len(vq.questions), "by_kind": vq.by_kind(),
                               "warning": vq.lookups_only(),
                               "candidates": vq.candidates, "left_out": vq.dropped, "probes": probes and probes.to_json()},
                              ensure_ascii=False, indent=1))
        return
    kinds_text = ", ".join(f"{k} {v}" for k, v in vq.by_kind().items())
    click.echo(f"wrote {len(vq.questions)} questions ({kinds_text}) to {out}; read their `why` and prune")
    if vq.lookups_only():
        click.echo("warning: " + vq.lookups_only())
    if probes:
        click.echo(f"probes: {probes.probes} in {probes.gold} (index {probes.db})")
    else:
        click.echo(f"probes: autoresearch probes make {vq.vault} --gold {out} --out DIR")


@gold.command("cloze")
@click.argument("vault_or_db", type=PathValue(exists=True))
@click.option("--out", required=True, type=output_folder(),
              help="The folder for the questions (gold.yaml), the vault's copy without their lines (vault/) and "
                   "its index (index.sqlite).")
@click.option("-n", "n", type=click.IntRange(min=1), default=MADE_N, show_default=True,
              help="At most this many questions, one line of each note.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="The same seed makes the same set.")
@click.option("--like", type=PathValue(exists=True), default=None, metavar="INDEX",
              help="Build the copy's index with this index's embedder and chunking (default: VAULT_OR_DB when it "
                   "is an index, else the default embedder).")
@click.option("--keep-notes-of", "keep_of", type=PathValue(exists=True), multiple=True, metavar="GOLD",
              help="A gold set whose gold notes keep every line (your own questions asked of the same copy); "
                   "repeatable.")
@click.option("--words", type=click.IntRange(min=0), default=None, metavar="W",
              help="Each question is its line's first W words; 0 asks the whole line. [default: %s]"
                   % (CLOZE_WORDS or "the whole line"))
@json_option()
def gold_cloze(vault_or_db, out, n, seed, like, keep_of, words, as_json):
    """Cloze questions: one line of each note, blanked in a copy of VAULT_OR_DB and asked of the copy's index, so
    the search must find the note by what the rest of it says. Tune on them with `sweep --db OUT/index.sqlite
    --vault OUT/vault --gold OUT/gold.yaml`; never ask them of the vault itself (the line would answer itself)."""
    from tuner.data.cloze import refresh_cloze
    from tuner.data.gold import load_gold
    try:
        if like is None and Path(vault_or_db).is_file():
            like = vault_or_db
        keep = {g for path in keep_of for q in load_gold(path).questions for g in q.gold}
        made, _ = refresh_cloze(vault_or_db, out, n=n, seed=seed, keep_notes=keep, like=like,
                                words=CLOZE_WORDS if words is None else words or None)
    except SearchCoreError as e:
        fail(e)
    if as_json:
        click.echo(json.dumps(made.to_json(), ensure_ascii=False, indent=1))
        return
    click.echo(f"wrote {made.questions} cloze questions (of {made.notes} notes) to {made.gold}; the copy without "
               f"their lines is {made.vault}, its index {made.db}")
    if made.dropped:
        click.echo("left out: " + "; ".join(f"{k}: {v}" for k, v in sorted(made.dropped.items())))
    click.echo(f"tune on them: autoresearch sweep --db {made.db} --vault {made.vault} --gold {made.gold}")


@gold.command("from-log")
@recall_log_option()
@click.option("--out", required=True, type=output_file(), help="The gold YAML file to write.")
@click.option("--since", default="all", show_default=True, callback=window_value, help="Log window: 7d, 24h, 90m, or `all`.")
@click.option("--existing", "existing", multiple=True, type=input_file(),
              help="A gold set whose questions a call must not repeat (near-duplicates are left out); repeatable.")
@json_option()
def gold_from_log(log_path, out, since, existing, as_json):
    """Labelled recall calls as gold: a call labelled relevant becomes a question whose gold is the note the
    block led with, one labelled irrelevant a probe (label with `recall-log label` or the /label page)."""
    from tuner.data.log_gold import write_gold_from_log
    try:
        lg = write_gold_from_log(log_path, out, since_s=duration(since, allow_all=True, param_hint="--since"),
                                 existing=existing)
    except SearchCoreError as e:
        fail(e)
    n_probes = sum(q.level == "probe" for q in lg.questions)
    if as_json:
        click.echo(json.dumps({"out": str(out), "questions": len(lg.questions) - n_probes, "probes": n_probes,
                               "labelled": lg.labelled, "left_out": lg.left_out}, ensure_ascii=False, indent=1))
        return
    left = "; ".join(f"{k}: {v}" for k, v in lg.left_out.items())
    click.echo(f"wrote {len(lg.questions) - n_probes} questions and {n_probes} probes from {lg.labelled} labelled "
               f"calls to {out}" + (f" (left out: {left})" if left else ""))


@gold.command("init")
@click.argument("vault_or_db", type=PathValue(exists=True))
@click.option("--out", required=True, type=output_file(), help="The new gold YAML file.")
@click.option("-n", "n", type=click.IntRange(min=1), default=6, show_default=True, help="Notes to write questions about.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
def gold_init(vault_or_db, out, n, seed):
    """A gold set to fill in: notes picked across VAULT_OR_DB's folders, each with a commented-out question
    slot per level (L0, L1, XL, L2, probe); remove a slot's `# ` and write its query."""
    from tuner.data.gold_template import write_gold_template
    try:
        picked = write_gold_template(vault_or_db, out, n=n, seed=seed)
    except SearchCoreError as e:
        fail(e)
    click.echo(f"wrote a template for {len(picked)} notes ({', '.join(picked)}) to {out}; fill the slots, then "
               f"`autoresearch eval --gold {out}`")


COMMANDS = (gold,)
