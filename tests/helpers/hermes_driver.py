"""Runs inside the Hermes agent's own virtual environment (never ours): drives the real Hermes (its
MemoryManager, plugin discovery and AIAgent loop) against our installed provider and prints one JSON object.

    <hermes venv>/bin/python tests/helpers/hermes_driver.py SCENARIO '{"home": ..., "server": ..., ...}'

Every socket may connect to loopback only (the guard below); the model call of AIAgent is a local function
that records each request, so no model and no network are needed. HERMES_HOME is set before Hermes loads.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import socket
import sys
import time
import urllib.error
import urllib.request

SCENARIO, ARGS = sys.argv[1], json.loads(sys.argv[2])
os.environ["HERMES_HOME"] = ARGS["home"]
for k, v in ARGS.get("env", {}).items():
    os.environ[k] = v

REFUSED: list[str] = []


def _loopback(address) -> bool:
    if isinstance(address, (str, bytes)):          # AF_UNIX
        return True
    host = address[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_connect, _connect_ex = socket.socket.connect, socket.socket.connect_ex


def _guarded(method):
    def connect(self, address):
        if not _loopback(address):
            REFUSED.append(repr(address))
            raise ConnectionRefusedError(f"socket guard: {address!r} is not loopback")
        return method(self, address)
    return connect


socket.socket.connect, socket.socket.connect_ex = _guarded(_connect), _guarded(_connect_ex)

WARNINGS: list[str] = []


class _Collect(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.WARNING:
            WARNINGS.append(f"{record.name}: {record.getMessage()}")


logging.getLogger().addHandler(_Collect())


def server_idle(timeout: float = 120.0) -> None:
    """Wait until the server has no search in flight (its /healthz says so), or fail."""
    url = ARGS["server"].rstrip("/") + "/healthz"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if json.loads(r.read()).get("in_flight") == 0:
                    return
        except urllib.error.HTTPError as e:      # 503 while degraded, with the same body
            if json.loads(e.read()).get("in_flight") == 0:
                return
        except OSError:
            if ARGS.get("dead_server"):
                return
        time.sleep(0.05)
    raise SystemExit("the server still had a search in flight after 120 s")


def provider_log() -> list[dict]:
    path = os.path.join(ARGS.get("profile_home") or ARGS["home"], "logs", "autoresearch-provider.jsonl")
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []


def scenario_manager() -> dict:
    """(a) The MemoryManager loads our provider from config.yaml and injects our block one turn late."""
    from agent.memory_manager import MemoryManager, build_memory_context_block, sanitize_context
    from agent.memory_provider import MemoryProvider
    from hermes_cli.config import load_config
    from plugins.memory import discover_memory_providers, load_memory_provider

    name = load_config()["memory"]["provider"]
    provider = load_memory_provider(name)
    mm = MemoryManager()
    mm.add_provider(provider)
    mm.initialize_all(session_id=ARGS["session"], platform="cli")
    out = {"selected": name, "discovered": [list(d) for d in discover_memory_providers() if d[0] == name],
           "is_memory_provider": isinstance(provider, MemoryProvider), "module": type(provider).__module__,
           "tools": sorted(s["name"] for s in mm.get_all_tool_schemas()), "turns": []}
    for message in ARGS["messages"]:
        context = mm.prefetch_all(message)                        # start of the turn: Hermes passes no session
        mm.sync_all(message, "ok", session_id=ARGS["session"])
        mm.queue_prefetch_all(message, session_id=ARGS["session"])  # end of the turn
        assert mm.flush_pending(60)
        server_idle()
        out["turns"].append({"context": context, "fenced": build_memory_context_block(context),
                             "sanitized_equal": sanitize_context(context) == context})
    if ARGS.get("fact"):   # a wrapped provider's tool, through Hermes's routing
        out["tool_result"] = json.loads(mm.handle_tool_call("fact_store", {"action": "add", "content": ARGS["fact"]}))
        context = mm.prefetch_all(ARGS["messages"][-1])
        out["after_fact"] = context
        out["system_prompt"] = mm.build_system_prompt()
    mm.shutdown_all()
    return out


def _response(text: str):
    from types import SimpleNamespace
    msg = SimpleNamespace(role="assistant", content=text, tool_calls=None, reasoning=None, reasoning_content=None,
                          refusal=None)
    usage = SimpleNamespace(prompt_tokens=10, completion_tokens=5, total_tokens=15, prompt_tokens_details=None,
                            completion_tokens_details=None)
    return SimpleNamespace(id="local", model="local-model", choices=[SimpleNamespace(index=0, message=msg,
                                                                                     finish_reason="stop")],
                           usage=usage)


def scenario_agent() -> dict:
    """(b)-(g) Hermes's AIAgent loop, its model call replaced by a local function that records each request."""
    from run_agent import AIAgent

    if ARGS.get("profile_home"):   # a profile chosen the way Hermes scopes one per task: its ContextVar
        from hermes_constants import set_hermes_home_override
        set_hermes_home_override(ARGS["profile_home"])
    requests = []

    def model_call(api_kwargs, **_):
        requests.append([{"role": m.get("role"), "content": m.get("content")} for m in api_kwargs["messages"]
                         if m.get("role") == "user"])
        return _response(f"answer {len(requests)}")

    kwargs = {"session_id": ARGS["session"]} if ARGS.get("session") else {}
    agent = AIAgent(base_url="http://127.0.0.1:9/v1", api_key="local", model="local-model", quiet_mode=True,
                    skip_context_files=True, enabled_toolsets=[], max_iterations=2, **kwargs)
    agent._interruptible_api_call = model_call
    agent._interruptible_streaming_api_call = lambda api_kwargs, on_first_delta=None: model_call(api_kwargs)
    providers = [p.name for p in agent._memory_manager.providers] if agent._memory_manager else []
    history, turn_s = [], []
    for message in ARGS["messages"]:
        t0 = time.perf_counter()
        result = agent.run_conversation(message, conversation_history=history)
        turn_s.append(time.perf_counter() - t0)
        history = result["messages"]
        if agent._memory_manager:
            assert agent._memory_manager.flush_pending(60)
        server_idle()
    session_id = agent.session_id
    if agent._memory_manager:
        agent.shutdown_memory_provider(history)
    return {"providers": providers, "session_id": session_id, "requests": requests, "turn_s": turn_s}


def select_with_hermes_cli() -> None:
    """`hermes config set memory.provider autoresearch`, the line `autoresearch hermes install` prints."""
    from hermes_cli.main import main
    sys.argv = ["hermes", "config", "set", "memory.provider", "autoresearch"]
    try:
        main()
    except SystemExit as e:
        if e.code:
            raise


if __name__ == "__main__":
    if ARGS.get("select_with_cli"):
        select_with_hermes_cli()
    result = {"manager": scenario_manager, "agent": scenario_agent}[SCENARIO]()
    result.update(refused=REFUSED, warnings=WARNINGS, provider_log=provider_log())
    print("HERMES-DRIVER-RESULT " + json.dumps(result, ensure_ascii=False))
