"""Fuzzing with hypothesis: config files, bridge arguments and upstream tool lists.

Kept fast for CI: bounded example counts, no deadline (a loaded single core must not fail them),
derandomized so a failure reproduces. The stdio frame fuzzing lives in `e2e/test_stdio_edge.py`.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import anyio
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inprocess import Upstream, gateway, tool
from mcp import Client, types

from proxy.config import ToolSearchSettings, ToolsetsConfig, UpstreamConfig, load_config
from proxy.errors import ConfigError

FAST = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(max_size=10), inner, max_size=4), max_leaves=12)

# --- config files ------------------------------------------------------------------------------

_UPSTREAM_FIELDS = sorted(set(UpstreamConfig.model_fields) - {"name"})
_TOOLSETS_FIELDS = sorted(ToolsetsConfig.model_fields)
_VARIABLES = st.sampled_from(["${SET}", "${UNSET}", "${env:SET}", "${UNSET:-d}", "${", "$}", "${1}"])
_text_with_variables = st.lists(st.text(max_size=6) | _VARIABLES, max_size=3).map("".join)
_field_values = json_values | _text_with_variables | st.lists(_text_with_variables, max_size=3)


def _documents(fields: list[str]) -> st.SearchStrategy[Any]:
    known = st.dictionaries(st.sampled_from(fields), _field_values, max_size=len(fields))
    return known | json_values


_files = st.one_of(
    _documents(_UPSTREAM_FIELDS).map(lambda d: yaml.safe_dump(d)),
    st.text(max_size=80),  # anything at all, including broken YAML
)
_file_names = st.sampled_from(["a.yaml", "b.yml", "bad name.yaml", ".hidden.yaml", "x" * 70 + ".yaml"])


@FAST
@given(upstreams=st.dictionaries(_file_names, _files, max_size=3),
       toolsets=st.none() | _documents(_TOOLSETS_FIELDS).map(lambda d: yaml.safe_dump(d)) | st.text(max_size=80))
def test_any_config_dir_loads_and_every_problem_names_its_file(upstreams: dict[str, str], toolsets: str | None) -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "upstreams").mkdir()
        for name, text in upstreams.items():
            (root / "upstreams" / name).write_text(text, encoding="utf-8")
        if toolsets is not None:
            (root / "toolsets.yaml").write_text(toolsets, encoding="utf-8")
        config = load_config(root, environ={"SET": "value"})
        for problem in config.problems:
            assert isinstance(problem, ConfigError)
            assert Path(problem.path).parent in (root, root / "upstreams")
            assert problem.reason and "unexpected error" not in problem.reason, problem
        upstream_problems = [p for p in config.problems if Path(p.path).parent == root / "upstreams"]
        visible = [name for name in upstreams if not name.startswith(".")]
        assert len(config.upstreams) + len(upstream_problems) == len(visible)  # each file loads or says why


# --- bridge arguments --------------------------------------------------------------------------

_FLEET = [Upstream("disk", [tool("resize", "Resize a disk volume.", {"size": {"type": "integer", "minimum": 1}},
                                 ["size"]), tool("list", "List volumes.")]),
          Upstream("mail", [tool("send", "Send an email.", {"to": {"type": "string"}}, ["to"])])]
_BRIDGE = ToolsetsConfig(tool_search=ToolSearchSettings(enabled="on"))
_names = st.sampled_from(["disk__resize", "disk__list", "mail__send", "tool_call", "nope", ""]) | st.text(max_size=20)
_BRIDGE_CALLS = {
    "tool_search": st.fixed_dictionaries({}, optional={"queries": json_values | st.lists(st.text(max_size=20)),
                                                        "limit": json_values}),
    "tool_describe": st.fixed_dictionaries({}, optional={"names": json_values | st.lists(_names)}),
    "tool_call": st.fixed_dictionaries({}, optional={"name": _names | json_values, "arguments": json_values}),
}
_bridge_call = st.sampled_from(sorted(_BRIDGE_CALLS)).flatmap(
    lambda name: st.tuples(st.just(name), _BRIDGE_CALLS[name] | st.dictionaries(st.text(max_size=8), json_values)))


@settings(FAST, max_examples=25)
@given(calls=st.lists(_bridge_call, min_size=1, max_size=8))
def test_bridge_tools_answer_any_arguments_and_the_session_keeps_answering(calls: list[tuple[str, Any]]) -> None:
    async def run() -> None:
        async with gateway(_FLEET, _BRIDGE) as harness, Client(harness.server, mode="legacy") as client:
            for name, arguments in calls:
                with anyio.fail_after(30):
                    result = await client.call_tool(name, arguments)
                assert isinstance(result, types.CallToolResult)
            with anyio.fail_after(30):
                healthy = await client.call_tool("tool_call", {"name": "disk__resize", "arguments": {"size": 2}})
            assert not healthy.is_error

    anyio.run(run)


# --- tool lists from upstreams -----------------------------------------------------------------

_SURFACE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_schemas = st.dictionaries(st.sampled_from(["type", "properties", "required", "$ref", "items", "x"]), json_values,
                           max_size=4).map(lambda schema: {**schema, "type": "object"})
_hostile_tools = st.lists(st.builds(lambda name, description, schema: types.Tool(
    name=name, description=description, input_schema=schema),
    st.text(max_size=80) | st.from_regex(r"[a-z_]{1,70}", fullmatch=True), st.none() | st.text(max_size=200), _schemas),
    max_size=12)


@settings(FAST, max_examples=25)
@given(first=_hostile_tools, second=_hostile_tools, search=st.booleans())
def test_any_upstream_tool_list_gives_a_valid_deterministic_surface(
    first: list[types.Tool], second: list[types.Tool], search: bool
) -> None:
    config = ToolsetsConfig(tool_search=ToolSearchSettings(enabled="on" if search else "off"))

    async def surface(order: int) -> list[types.Tool]:
        upstreams = [Upstream("one", []), Upstream("two", [])]
        async with gateway(upstreams, config) as harness, Client(harness.server, mode="legacy") as client:
            # What the fleet registers: every tool that reads as a `Tool` (the rest are salvaged away).
            harness.registry.set_server_tools("one", first[::order])
            harness.registry.set_server_tools("two", second[::order])
            with anyio.fail_after(30):
                tools = (await client.list_tools()).tools
                if search:
                    found = await client.call_tool("tool_search", {"queries": ["tool"]})
                    assert not found.is_error
            return tools

    async def run() -> None:
        tools = await surface(1)
        names = [t.name for t in tools]
        assert all(_SURFACE_NAME.fullmatch(name) for name in names), names
        assert len(set(names)) == len(names)
        again = await surface(-1)  # the same catalog, listed by the upstreams in reverse order
        assert [t.model_dump() for t in again] == [t.model_dump() for t in tools]

    anyio.run(run)
