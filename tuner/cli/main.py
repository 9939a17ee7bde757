"""The `autoresearch` group. Its verbs are named in tuner/cli/__init__.py and imported when first asked for."""

import importlib

import click


class Main(click.Group):
    """Every verb's last word on a full disk: a message naming the fix, not a traceback. What the verb was
    replacing is whole either way (writes go through search_core.files.atomic_write_text and SQLite
    transactions).

    The verbs are imported when named (`verb_modules`: verb -> the module whose COMMANDS holds it): importing
    every verb module loaded the tuner (the daemon's config, the sweep, the evaluation) into each `search`,
    ~9 % of a cold search's CPU at 567,000 chunks. `--help`, and anything reading `commands`, imports them all."""

    verb_modules: dict[str, str] = {}

    def _register(self, module_name: str) -> None:
        for command in importlib.import_module(module_name).COMMANDS:
            self._commands[command.name] = command

    @property
    def commands(self) -> dict[str, click.Command]:
        for module_name in dict.fromkeys(self.verb_modules.values()):
            if not all(v in self._commands for v, m in self.verb_modules.items() if m == module_name):
                self._register(module_name)
        return self._commands

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        self._commands = value

    def get_command(self, ctx, cmd_name):
        if cmd_name not in self._commands and cmd_name in self.verb_modules:
            self._register(self.verb_modules[cmd_name])
        return self._commands.get(cmd_name)

    def list_commands(self, ctx):
        return sorted(set(self._commands) | set(self.verb_modules))

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
