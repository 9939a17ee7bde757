"""The `gold` verbs: questions the vault supplies (`gold make`), labelled recall calls as gold (`gold from-log`),
and a template to write questions into (`gold init`). Thin: each calls one function of tuner.data."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

from search_core import SearchCoreError

from tuner.cli.options import duration, fail, json_option, recall_log_option


@click.group()
def gold():
    """Gold sets without writing them all by hand: from the vault's own text, from labelled recall calls, or a template."""


@gold.command("make")
@click.argument("vault_or_db", type=click.Path(path_type=Path))
@click.option("--out", required=True, type=click.Path(path_type=Path), help="The gold YAML file to write.")
@click.option("-n", "n", type=click.IntRange(min=1), default=200, show_default=True,
              help="At most this many questions, taken in turn across notes (no note fills the set).")
@click.option("--seed", type=int, default=0, show_default=True, help="The same seed makes the same set.")
@click.option("--kinds", default=None,
              help="Comma-separated: anchor, heading, alias, summary, title (default: anchor,heading,alias; "
                   "summary and title questions are matched by the very field they come from).")
@click.option("--probes", "n_probes", type=click.IntRange(min=1), default=None,
              help="Also make about this many probes with `probes make` (holds notes out of a new index, "
                   "written to OUT's folder as OUT-probes/; indexes the vault).")
@json_option()
def gold_make(vault_or_db, out, n, seed, kinds, n_probes, as_json):
    """Questions VAULT_OR_DB answers, cut from what its author wrote about each note (no model): the words
    around links to a note in other notes (the linking note is held out of that question's search), headings,
    aliases. Read the `why` of each and prune."""
    from tuner.data.vault_questions import DEFAULT_KINDS, make_probes_for, write_vault_questions
    try:
        chosen = tuple(k.strip() for k in kinds.split(",") if k.strip()) if kinds else DEFAULT_KINDS
        command = "autoresearch " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else ""
        vq = write_vault_questions(vault_or_db, out, n=n, seed=seed, kinds=chosen, command=command)
        probes = make_probes_for(vq, out, n_probes, seed=seed) if n_probes else None
    except SearchCoreError as e:
        fail(e)
    if as_json:
        click.echo(json.dumps({"out": str(out), "questions": len(vq.questions), "by_kind": vq.by_kind(),
                               "candidates": vq.candidates, "left_out": vq.dropped, "probes": probes},
                              ensure_ascii=False, indent=1))
        return
    kinds_text = ", ".join(f"{k} {v}" for k, v in vq.by_kind().items())
    click.echo(f"wrote {len(vq.questions)} questions ({kinds_text}) to {out}; read their `why` and prune")
    if probes:
        click.echo(f"probes: {probes['probes']} in {probes['gold']} (index {probes['db']})")
    else:
        click.echo(f"probes: autoresearch probes make {vq.vault} --gold {out} --out DIR")


COMMANDS = (gold,)
