"""The `autoresearch` group. The verbs are registered on it in tuner/cli/__init__.py."""

import click


class Main(click.Group):
    """Every verb's last word on a full disk: a message naming the fix, not a traceback. What the verb was
    replacing is whole either way (writes go through search_core.files.atomic_write_text and SQLite
    transactions)."""

    def invoke(self, ctx):
        from search_core.files import is_disk_full
        try:
            return super().invoke(ctx)
        except Exception as e:
            if not is_disk_full(e):
                raise
            raise click.ClickException(
                f"the disk refused a read or write ({e}): free space, or point --db, --ledger or --out at a "
                "larger disk, then run the command again") from e


@click.group(cls=Main)
@click.version_option(package_name="autoresearch")
def main():
    """Local hybrid search over a markdown vault, and the tuner that sets its knobs by experiment."""
