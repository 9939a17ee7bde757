"""The CLI reference (docs/cli.md) rendered from the `--help` of every verb, so it cannot drift from the
code: `python docs/make_cli_reference.py` writes it, tests/tuner/cli/test_docs.py fails when it is out of date."""

from __future__ import annotations

import click

# a fixed width: the text must not depend on the terminal it was generated in
WIDTH = 100


def _walk(cmd: click.Command, ctx: click.Context):
    yield cmd, ctx
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.list_commands(ctx)):
            sub = cmd.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            yield from _walk(sub, click.Context(sub, info_name=name, parent=ctx, terminal_width=WIDTH,
                                                max_content_width=WIDTH))


def cli_reference(group: click.Group, prog: str = "autoresearch") -> str:
    root = click.Context(group, info_name=prog, terminal_width=WIDTH, max_content_width=WIDTH)
    verbs = list(_walk(group, root))
    lines = ["# Command-line reference", "",
             "Generated from `--help` by `python docs/make_cli_reference.py`; do not edit by hand.", ""]
    lines += [f"- [`{ctx.command_path}`](#{ctx.command_path.replace(' ', '-')})" for _, ctx in verbs[1:]]
    for cmd, ctx in verbs:
        lines += ["", f"## {ctx.command_path}", "", "```text", cmd.get_help(ctx), "```"]
    return "\n".join(lines) + "\n"
