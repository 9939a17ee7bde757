"""The `autoresearch` group. The verbs are registered on it in tuner/cli/__init__.py."""

import click


@click.group()
@click.version_option(package_name="autoresearch")
def main():
    """Local hybrid search over a markdown vault, and the tuner that sets its knobs by experiment."""
