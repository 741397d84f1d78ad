"""The stdio transport's edges, through a real `toolbridge serve` subprocess: signals, raw frames, secrets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import tty
from pathlib import Path
from typing import Any

import anyio
import pytest
from fleetdir import REPO, write_fleet
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_lifecycle import processes_mentioning

pytestmark = pytest.mark.anyio


async def test_sigterm_exits_while_the_client_keeps_stdin_open(tmp_path: Path) -> None:
    marker = f"stdinopen{os.getpid()}"
    config = write_fleet(tmp_path, {"one": ["--prefix", marker], "two": ["--prefix", marker]})
    process = subprocess.Popen([sys.executable, "-m", "proxy", "serve", "--config-dir", str(config)], cwd=REPO,
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        with anyio.fail_after(20):
            while len(processes_mentioning(marker)) < 2:
                await anyio.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        started = time.monotonic()
        returncode = process.wait(timeout=20)  # stdin stays open: the client has not gone away
        elapsed = time.monotonic() - started
        stderr = process.stderr.read().decode() if process.stderr else ""
    finally:
        process.kill()
        for pipe in (process.stdin, process.stderr):
            if pipe:
                pipe.close()
    assert returncode == 0, stderr[-2000:]
    assert elapsed < 10
    assert processes_mentioning(marker) == []


def exchange(config: Path, lines: list[str], last_id: int | str) -> list[dict]:
    """Write raw lines to `toolbridge serve`'s stdin; read answers until the one to `last_id`."""
    process = subprocess.Popen([sys.executable, "-m", "proxy", "serve", "--config-dir", str(config)], cwd=REPO,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    watchdog = threading.Timer(60, process.kill)  # a missing answer fails the test instead of hanging it
    watchdog.start()
    answers: list[dict] = []
    try:
        assert process.stdin and process.stdout
        process.stdin.write("".join(line + "\n" for line in lines))
        process.stdin.flush()
        while not answers or answers[-1].get("id") != last_id:
            line = process.stdout.readline()
            assert line, f"stdout closed; answers so far: {answers}"
            answers.append(json.loads(line))
    finally:
        watchdog.cancel()
        process.kill()
        process.communicate()
    return answers


INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})


def test_bad_frames_get_json_rpc_errors_and_the_session_keeps_answering(tmp_path: Path) -> None:
    config = write_fleet(tmp_path, {"one": ["--tools", "2", "--prefix", "one"]})
    answers = exchange(config, [
        INITIALIZE, INITIALIZED,
        json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": 5, "arguments": []}}),
        json.dumps([{"jsonrpc": "2.0", "id": 8, "method": "tools/list"}]),
        "this is not json",
        json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
    ], last_id=9)
    by_id = {answer.get("id"): answer for answer in answers if answer.get("id") is not None}
    assert by_id[7]["error"]["code"] == -32602
    nulls = [answer["error"]["code"] for answer in answers if answer.get("id") is None]
    assert sorted(nulls) == [-32700, -32600]
    assert "tools" in by_id[9]["result"]


def test_a_terminal_on_stdin_is_served(tmp_path: Path) -> None:
    """The event loop polls pipes and sockets; a terminal (someone running `serve` by hand) is read in a thread."""
    config = write_fleet(tmp_path, {"one": ["--tools", "2", "--prefix", "one"]})
    controller, terminal = os.openpty()
    tty.setraw(terminal)
    process = subprocess.Popen([sys.executable, "-m", "proxy", "serve", "--config-dir", str(config)], cwd=REPO,
                               stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    os.close(terminal)
    watchdog = threading.Timer(60, process.kill)  # a missing answer fails the test instead of hanging it
    watchdog.start()
    try:
        assert process.stdout
        ping = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping"})
        os.write(controller, "".join(line + "\n" for line in [INITIALIZE, INITIALIZED, ping]).encode())
        answers = {}
        while 9 not in answers:
            answer = json.loads(process.stdout.readline())
            answers[answer.get("id")] = answer
    finally:
        watchdog.cancel()
        process.kill()
        process.communicate()
        os.close(controller)
    assert answers[0]["result"]["serverInfo"]["name"] == "toolbridge"
    assert answers[9] == {"jsonrpc": "2.0", "id": 9, "result": {}}


def test_a_secret_interpolated_into_command_and_args_is_redacted(tmp_path: Path) -> None:
    secret = "pl4nted-s3cret-v4lue"
    (tmp_path / "upstreams").mkdir()
    (tmp_path / "upstreams" / "leaky.yaml").write_text(
        'command: "/nonexistent/bin-${TB_PLANTED}"\nargs: ["--token", "${env:TB_PLANTED}"]\ncwd: /tmp\n')
    status = subprocess.run([sys.executable, "-m", "proxy", "status", "--config-dir", str(tmp_path)], cwd=REPO,
                            capture_output=True, text=True, timeout=60, env={**os.environ, "TB_PLANTED": secret})
    assert "parked" in status.stdout and "[REDACTED]" in status.stdout + status.stderr
    assert secret not in status.stdout + status.stderr


_ids = st.integers(0, 100)  # the final check's id is a string: no random frame can answer it
_frames = st.one_of(
    st.text(max_size=60).map(lambda text: text.replace("\n", " ").replace("\r", " ")),
    st.fixed_dictionaries({"jsonrpc": st.sampled_from(["2.0", "1.0", 2])}, optional={
        "id": _ids | st.none() | st.text(max_size=5), "method": st.sampled_from(
            ["tools/list", "tools/call", "ping", "initialize", "resources/read", "x", ""]),
        "params": st.none() | st.lists(st.integers(), max_size=2) | st.dictionaries(
            st.sampled_from(["name", "arguments", "uri", "cursor"]), st.text(max_size=8) | st.integers(), max_size=3),
    }).map(json.dumps),
    st.lists(st.just({"jsonrpc": "2.0", "id": 1, "method": "ping"}), max_size=2).map(json.dumps),
)


@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(frames=st.lists(_frames, min_size=1, max_size=12))
def test_random_frames_never_stop_the_proxy_answering(frames: list[str], tmp_path_factory: Any) -> None:
    config = write_fleet(tmp_path_factory.mktemp("frames"), {"one": ["--tools", "2", "--prefix", "one"]})
    final = json.dumps({"jsonrpc": "2.0", "id": "final", "method": "tools/list"})
    answers = exchange(config, [INITIALIZE, INITIALIZED, *frames, final], last_id="final")
    assert "tools" in answers[-1]["result"]
    assert all(answer.get("jsonrpc") == "2.0" for answer in answers)
