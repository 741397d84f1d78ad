"""One abusive upstream never stalls another: a healthy stdio upstream's calls, `tools/list` and `tool_search`
through the gateway stay fast while a hostile stdio upstream lists a 50 MB description or 200,000 tools (each
re-listed every second) or bursts 100,000 list_changed notifications; a schema nested 10,000 deep drops only
its own tool. Sizes are the issue's. Each run is `bench/hostile_upstreams.py` (which prints the same runs'
p50/p99) in a process of its own: what earlier tests left in this one must not be measured.

Here a healthy operation must answer within a bound ten times the issue's (a stalled one waits out the whole
abuse); the issue's p99 bound of 500 ms is a benchmark gate, run on a quiet machine:
`python -m bench.hostile_upstreams --gate 500` (docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import types

from proxy.upstream.connection._limits import CUT_MARK, MAX_DESCRIPTION_CHARS, MAX_TOOLS
from proxy.upstream.connection._sliced_reader import read_message

REPO = Path(__file__).resolve().parent.parent
P99_MS = 5000.0  # ten times the bound on a healthy call's delay (the bench gate's)
SECONDS = 4.0  # at least ~100 operations, and on until the abuse is over
LIMIT = 120.0  # each run takes 10-25 s on a loaded 2-core machine


@dataclass
class Latency:
    """Per-operation latencies (ms) of one run."""

    samples: list[float]

    @property
    def p99(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


@dataclass
class Abused:
    latency: Latency
    registered: set[str]
    burst_done: bool
    warnings: str  # the run's stderr: its WARNING records


def run(name: str) -> Abused:
    """The bench's run of abuse `name`; one that does not end (the abused server's tools never all registered,
    a burst never answered) fails after `LIMIT`."""
    command = [sys.executable, "-m", "bench.hostile_upstreams", "--only", name, "--seconds", str(SECONDS), "--json"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=LIMIT)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    return Abused(Latency(report["samples"]), set(report["registered"]), report["burst_done"],
                  done.stderr)


def test_a_50_mb_description_is_cut_and_stalls_no_other_upstream() -> None:
    result = run("description")
    assert result.latency.p99 < P99_MS, result.latency
    assert "hostile__huge" in result.registered
    assert "1 tool descriptions cut to the cap of 65536 characters" in result.warnings


def test_200_000_tools_are_capped_and_stall_no_other_upstream() -> None:
    result = run("tools")
    assert result.latency.p99 < P99_MS, result.latency
    assert len([name for name in result.registered if name.startswith("hostile__")]) == MAX_TOOLS
    dropped = 200_002 - MAX_TOOLS
    assert f"server hostile: {dropped} tools dropped: over the caps of {MAX_TOOLS} tools" in result.warnings


def test_a_burst_of_100_000_list_changed_stalls_no_other_upstream() -> None:
    result = run("burst")
    assert result.burst_done
    assert result.latency.p99 < P99_MS, result.latency


def test_a_schema_nested_10_000_deep_drops_only_that_tool() -> None:
    result = run("deep")
    assert {"hostile__echo", "hostile__burst", "hostile__fine"} <= result.registered
    assert "hostile__deep" not in result.registered
    assert "server hostile: tool 'deep' skipped: its definition nests deeper than 128 levels" in result.warnings
    assert result.latency.p99 < P99_MS, result.latency


@pytest.mark.anyio
@pytest.mark.parametrize("text", ["é" * (3 << 20), "ab" * (3 << 20), "line\\n" * (1 << 20)])
async def test_a_long_description_is_cut_to_whole_characters_without_decoding_it_whole(text: str) -> None:
    tools = [{"name": "long", "description": "@", "inputSchema": {"type": "object"}},
             {"name": "next", "inputSchema": {"type": "object"}}]
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}}, ensure_ascii=False).encode()
    message = await read_message(line.replace(b'"@"', b'"' + text.encode() + b'"'), "s")
    assert isinstance(message, types.JSONRPCResponse)
    listed = message.result["tools"]
    assert [tool["name"] for tool in listed] == ["long", "next"]
    assert listed[0]["description"] == text.replace("\\n", "\n")[:MAX_DESCRIPTION_CHARS - len(CUT_MARK)] + CUT_MARK


@pytest.mark.anyio
async def test_a_large_call_result_is_read_whole() -> None:
    text = "z" * (3 << 20)  # a run free of quotes that a tool list would have shortened
    line = json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": text}]}}).encode()
    message = await read_message(line, "s")
    assert isinstance(message, types.JSONRPCResponse)
    assert message.result["content"][0]["text"] == text
