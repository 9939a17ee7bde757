"""Write docs/cli.md from the `--help` of every `autoresearch` verb.

    python docs/make_cli_reference.py           # rewrite docs/cli.md
    python docs/make_cli_reference.py --check   # exit 1 if docs/cli.md is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.cli import main as cli  # noqa: E402
from tuner.cli.reference import cli_reference  # noqa: E402

OUT = ROOT / "docs" / "cli.md"


def main(argv: list[str]) -> int:
    text = cli_reference(cli)
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT.relative_to(ROOT)} is out of date: run python docs/make_cli_reference.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
