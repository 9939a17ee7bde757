#!/usr/bin/env bash
# A virtual environment holding the real Hermes agent (hermes-agent from PyPI), for the contract tests.
# It is never our environment: hermes-agent pins ~20 packages exactly and installs generic top-level modules
# (agent, tools, plugins, cli, utils). Cached outside the checkout, keyed by version, so a rerun is instant;
# a half-built venv is never used (it is built beside the cache and moved in when complete).
# Prints the venv's python on stdout; exits non-zero when it cannot be built.
set -euo pipefail
VERSION="${HERMES_AGENT_VERSION:-0.19.0}"
CACHE="${AUTORESEARCH_CI_CACHE:-$HOME/.cache/autoresearch-ci}"
VENV="$CACHE/hermes-agent-$VERSION"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import run_agent, agent.memory_manager" 2>/dev/null; then
    rm -rf "$VENV" "$VENV.building"
    mkdir -p "$CACHE"
    "$PY" -m venv "$VENV.building" >&2
    "$VENV.building/bin/python" -m pip install -q --disable-pip-version-check "hermes-agent==$VERSION" >&2
    # venv scripts name their interpreter by absolute path: rebuild them at the final place
    # (`venv --upgrade` redoes the interpreter links, not pip's entry points such as `hermes` nor the activate
    # scripts, which still name the .building folder: rewrite every text file in bin/ that does)
    mv "$VENV.building" "$VENV"
    "$PY" -m venv --upgrade "$VENV" >&2
    grep -lIZ "$VENV.building" "$VENV"/bin/* | xargs -0r sed -i "s|$VENV.building|$VENV|g"
    if grep -lI "$VENV.building" "$VENV"/bin/* >&2; then echo "hermes venv: scripts above still name $VENV.building" >&2; exit 1; fi
    "$VENV/bin/python" -c "import run_agent, agent.memory_manager" >&2
fi
echo "$VENV/bin/python"
