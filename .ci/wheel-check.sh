#!/usr/bin/env bash
# The wheel as a user gets it: build it from this checkout, install it in fresh virtual environments
# outside the checkout, and run it from there.
#   core only      : `autoresearch --help`, none of the extras' packages installed, index + search of the
#                    packaged demo vault, and the verbs of an extra name the extra when it is missing
#   core + [tune]  : `autoresearch demo --rounds 3`
# Usage: bash .ci/wheel-check.sh   (from anywhere; KEEP=1 keeps the temporary folder)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d -t autoresearch-wheel-XXXXXX)"
if [ "${KEEP:-0}" = 1 ]; then echo "wheel-check: keeping $tmp"; else trap 'rm -rf "$tmp"' EXIT; fi
case "$tmp" in "$repo"/*) echo "wheel-check: $tmp is inside the checkout" >&2; exit 1;; esac

# build from a copy of the working tree, so no build/ or *.egg-info (stale files of an earlier build
# would go into the wheel) is left in the checkout; tuner/experiments is a link and stays one
mkdir -p "$tmp/src" "$tmp/dist" "$tmp/work"
tar -C "$repo" --exclude=./.git --exclude=./runs --exclude=./build --exclude='./*.egg-info' -cf - . | tar -C "$tmp/src" -xf -
python -m pip wheel -q --no-deps -w "$tmp/dist" "$tmp/src"
wheel="$(ls "$tmp"/dist/autoresearch-*.whl)"
echo "wheel-check: built $(basename "$wheel")"

python -m venv "$tmp/core"
"$tmp/core/bin/pip" install -q "$wheel"
cd "$tmp/work"
ar="$tmp/core/bin/autoresearch"
py="$tmp/core/bin/python"

"$ar" --help >/dev/null
# the core install has none of the extras' packages, and no torch
"$py" - <<'EOF'
from importlib.metadata import PackageNotFoundError, version
heavy = ["optuna", "scikit-learn", "matplotlib", "apscheduler", "starlette", "uvicorn", "mcp", "torch",
         "sentence-transformers", "psycopg"]
present = []
for name in heavy:
    try:
        present.append(f"{name}=={version(name)}")
    except PackageNotFoundError:
        pass
if present:
    raise SystemExit(f"wheel-check: the core install pulled in {', '.join(present)}")
print("wheel-check: core install has none of " + ", ".join(heavy))
EOF
vault="$("$py" -c 'from tuner.data.bundled import demo_vault; print(demo_vault())')"
case "$vault" in "$repo"/*) echo "wheel-check: the demo vault was found in the checkout ($vault)" >&2; exit 1;; esac
# the demo below reuses these embeddings (its index sits in demo/, the cache beside it)
"$ar" index "$vault" --db core.sqlite --cache demo/embed-cache.sqlite
"$ar" search "GraphRAG 커뮤니티 요약" --db core.sqlite --json > search.json
"$py" - <<'EOF'
import json
ids = [h["note_id"] for h in json.load(open("search.json", encoding="utf-8"))["results"]]
if "ai/rag/graphrag" not in ids[:3]:
    raise SystemExit(f"wheel-check: core search did not find ai/rag/graphrag in the top 3: {ids}")
print(f"wheel-check: core search ok, top 3 {ids[:3]}")
EOF
# a verb of an extra says which extra to install
for verb in "demo --rounds 1:tune" "serve --db core.sqlite:serve" "pgvector sync --db core.sqlite --dsn host=127.0.0.1:pgvector"; do
    args="${verb%%:*}"; extra="${verb##*:}"
    if msg="$("$ar" $args 2>&1)"; then echo "wheel-check: \`autoresearch $args\` ran without [$extra]" >&2; exit 1; fi
    grep -qF "pip install 'autoresearch[$extra]'" <<<"$msg" \
        || { echo "wheel-check: \`autoresearch $args\` did not name [$extra]: $msg" >&2; exit 1; }
done
echo "wheel-check: missing extras are named"

"$tmp/core/bin/pip" install -q "$wheel[tune]"
"$ar" demo --rounds 3 --out demo
test -s demo/ledger.sqlite
echo "wheel-check: ok"
