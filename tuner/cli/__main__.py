"""`python -m tuner.cli`: the same command as the `autoresearch` console script."""

from tuner.cli import main

main()
