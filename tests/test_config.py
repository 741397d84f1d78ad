"""Config loading (SPEC §3): interpolation, per-file problems with lines, lenient `tool_search`."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from proxy.config import (
    Config,
    ProfileConfig,
    ToolOverride,
    ToolSearchSettings,
    ToolsetsConfig,
    UpstreamConfig,
    interpolate,
    load_config,
    parse_tool_search,
)
from proxy.errors import ConfigError, DanglingName

DEFAULTS = ToolSearchSettings()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def upstream(tmp_path: Path, name: str, text: str) -> Path:
    return write(tmp_path / "upstreams" / f"{name}.yaml", text)


def load(tmp_path: Path, environ: dict[str, str] | None = None) -> Config:
    return load_config(tmp_path, environ={} if environ is None else environ)


def only_problem(config: Config) -> ConfigError:
    assert len(config.problems) == 1, config.problems
    return config.problems[0]


def tool_search_yaml(text: str) -> tuple[ToolSearchSettings, list[str]]:
    """Parse a `tool_search` block exactly as PyYAML's SafeLoader hands it over."""
    return parse_tool_search(yaml.safe_load(textwrap.dedent(text))["tool_search"])


# --- interpolation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${HOME}", "/home/u"),
        ("${env:HOME}", "/home/u"),
        ("Bearer ${TOKEN}", "Bearer s3cret"),
        ("${HOME}/${env:TOKEN}", "/home/u/s3cret"),
        ("${EMPTY}", ""),
        ("plain text", "plain text"),
        ("$HOME", "$HOME"),
        ("${1BAD}", "${1BAD}"),
        ("${env:}", "${env:}"),
        ("${other:HOME}", "${other:HOME}"),
    ],
)
def test_interpolate_strings(text: str, expected: str) -> None:
    environ = {"HOME": "/home/u", "TOKEN": "s3cret", "EMPTY": ""}
    assert interpolate(text, environ) == expected


def test_interpolate_walks_lists_and_mappings_but_not_keys_or_scalars() -> None:
    environ = {"A": "1", "B": "2"}
    value = {"${A}": ["${A}", {"x": "${env:B}"}], "n": 5, "flag": True, "none": None}
    assert interpolate(value, environ) == {"${A}": ["1", {"x": "2"}], "n": 5, "flag": True, "none": None}


def test_interpolate_unset_variable_raises_key_error_naming_it() -> None:
    with pytest.raises(KeyError) as caught:
        interpolate({"env": {"TZ": "${TZ}"}}, {})
    assert caught.value.args[0] == "TZ"


def test_interpolate_is_not_recursive() -> None:
    assert interpolate("${A}", {"A": "${B}", "B": "no"}) == "${B}"


def test_upstream_values_are_interpolated(tmp_path: Path) -> None:
    upstream(tmp_path, "remote", """
        url: https://${HOST}/mcp
        headers: {Authorization: "Bearer ${env:TOKEN}"}
    """)
    upstream(tmp_path, "local", """
        command: ${BIN}
        args: ["--tz", "${TZ}"]
        env: {TZ: "${TZ}"}
        cwd: ${HOME}
    """)
    environ = {"HOST": "mcp.example.com", "TOKEN": "abc", "BIN": "uvx", "TZ": "UTC", "HOME": "/srv"}
    config = load(tmp_path, environ)
    assert config.problems == []
    remote, local = config.upstreams["remote"], config.upstreams["local"]
    assert remote.url == "https://mcp.example.com/mcp"
    assert remote.headers == {"Authorization": "Bearer abc"}
    assert (local.command, local.args, local.env, local.cwd) == ("uvx", ("--tz", "UTC"), {"TZ": "UTC"}, "/srv")


def test_unset_variable_fails_only_that_upstream_with_its_line(tmp_path: Path) -> None:
    path = upstream(tmp_path, "needs_token", """
        url: https://mcp.example.com/mcp
        headers:
          Authorization: "Bearer ${MISSING_TOKEN}"
    """)
    upstream(tmp_path, "fine", "command: uvx\n")
    config = load(tmp_path)
    assert list(config.upstreams) == ["fine"]
    problem = only_problem(config)
    assert problem.path == str(path)
    assert "MISSING_TOKEN" in problem.reason
    assert "headers.Authorization" in problem.reason
    assert problem.line == 3


@pytest.mark.parametrize("where", ["env:\n  TOKEN", "headers:\n  Authorization"])
def test_an_unset_variable_is_reported_in_words_the_redactor_leaves_alone(tmp_path: Path, where: str) -> None:
    upstream(tmp_path, "a", f"url: https://mcp.example.com/mcp\n{where}: ${{NOT_SET_VAR}}\n")
    problem = only_problem(load(tmp_path))
    assert "[REDACTED]" not in problem.reason
    assert problem.reason.startswith("environment variable NOT_SET_VAR is not set (used in ")


def test_load_config_reads_os_environ_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLBRIDGE_TEST_BIN", "my-server")
    upstream(tmp_path, "s", "command: ${TOOLBRIDGE_TEST_BIN}\n")
    assert load_config(tmp_path).upstreams["s"].command == "my-server"


# --- a config dir with good and bad files -----------------------------------------------------


def test_broken_files_are_reported_and_the_valid_one_loads(tmp_path: Path) -> None:
    broken = upstream(tmp_path, "broken", """
        command: uvx
        args: [mcp-server-time
        env: {}
    """)
    unknown = upstream(tmp_path, "unknown", """
        command: uvx
        args: [x]
        colour: blue
    """)
    upstream(tmp_path, "valid", """
        command: uvx
        args: [mcp-server-time]
    """)
    config = load(tmp_path)
    assert list(config.upstreams) == ["valid"]
    assert config.upstreams["valid"].args == ("mcp-server-time",)
    problems = {Path(p.path).name: p for p in config.problems}
    assert set(problems) == {"broken.yaml", "unknown.yaml"}
    assert problems["broken.yaml"].path == str(broken)
    assert problems["broken.yaml"].reason.startswith("invalid YAML")
    assert problems["broken.yaml"].line == 3
    assert problems["unknown.yaml"].path == str(unknown)
    assert problems["unknown.yaml"].reason == "colour: unknown field"
    assert problems["unknown.yaml"].line == 3
    assert str(problems["unknown.yaml"]) == f"{unknown}:3: colour: unknown field"


def test_nested_unknown_field_points_at_its_line(tmp_path: Path) -> None:
    upstream(tmp_path, "s", """
        command: uvx
        tools:
          include: [a]
          exlude: [b]
    """)
    problem = only_problem(load(tmp_path))
    assert problem.reason == "tools.exlude: unknown field"
    assert problem.line == 4


def test_bad_value_points_at_its_line(tmp_path: Path) -> None:
    upstream(tmp_path, "s", """
        command: uvx

        timeout: soon
    """)
    problem = only_problem(load(tmp_path))
    assert problem.reason.startswith("timeout:")
    assert problem.line == 3


def test_overrides_load_keyed_by_raw_tool_name_with_values_from_the_environment(tmp_path: Path) -> None:
    upstream(tmp_path, "s", """
        command: uvx
        overrides:
          acme.post:
            name: post
            description: Post a note.
            hide: [workspace]
            defaults: {workspace: "${WORKSPACE}", count: 2}
    """)
    config = load_config(tmp_path, {"WORKSPACE": "W1"})
    assert not config.problems
    override = config.upstreams["s"].overrides["acme.post"]
    assert override == ToolOverride(name="post", description="Post a note.", hide=("workspace",),
                                    defaults={"workspace": "W1", "count": 2})
    assert "W1" in config.secrets  # taken from the environment: redacted wherever it would be logged


@pytest.mark.parametrize(("entry", "reason", "line"), [
    ("name: 'two words'", "overrides.t.name: 'two words' is not a tool name: 1 to 64 of A-Z a-z 0-9 _ . -", 4),
    ("name: ''", "overrides.t.name: '' is not a tool name: 1 to 64 of A-Z a-z 0-9 _ . -", 4),
    ("hide: [a, a]", "overrides.t.hide: a parameter is listed twice", 4),
    ("rename: x", "overrides.t.rename: unknown field", 4),
    ("defaults: [a]", "overrides.t.defaults: Input should be a valid dictionary", 4),
])
def test_an_invalid_override_points_at_its_line(tmp_path: Path, entry: str, reason: str, line: int) -> None:
    upstream(tmp_path, "s", f"command: uvx\noverrides:\n  t:\n    {entry}\n")
    problem = only_problem(load(tmp_path))
    assert (problem.reason, problem.line) == (reason, line)


@pytest.mark.parametrize("timeout", ["0", "-5"])
def test_timeouts_must_be_positive(tmp_path: Path, timeout: str) -> None:
    upstream(tmp_path, "s", f"command: uvx\ntimeout: {timeout}\n")
    assert only_problem(load(tmp_path)).reason.startswith("timeout:")


@pytest.mark.parametrize(
    "text",
    ["", "just a string\n", "- a\n- b\n", "42\n"],
    ids=["empty", "string", "list", "number"],
)
def test_a_file_that_is_not_a_mapping_is_a_problem(tmp_path: Path, text: str) -> None:
    upstream(tmp_path, "s", text)
    config = load(tmp_path)
    assert config.upstreams == {}
    assert "expected a mapping" in only_problem(config).reason


def test_a_name_field_is_refused_because_the_file_stem_is_the_name(tmp_path: Path) -> None:
    upstream(tmp_path, "s", "command: uvx\nname: other\n")
    problem = only_problem(load(tmp_path))
    assert problem.reason.startswith("name: unknown field")
    assert problem.line == 2


def test_non_string_keys_are_a_problem_not_a_crash(tmp_path: Path) -> None:
    upstream(tmp_path, "s", "command: uvx\n1: one\n")
    upstream(tmp_path, "t", "command: uvx\non: true\n")  # YAML 1.1: the key is the boolean True
    config = load(tmp_path)
    assert config.upstreams == {}
    assert all("unknown field" in p.reason for p in config.problems)
    assert [p.line for p in config.problems] == [2, 2]


def test_unreadable_bytes_are_a_problem(tmp_path: Path) -> None:
    path = tmp_path / "upstreams" / "s.yaml"
    path.parent.mkdir()
    path.write_bytes(b"command: \xff\xfe\n")
    assert "cannot read" in only_problem(load(tmp_path)).reason


def test_python_tags_are_refused_by_the_safe_loader(tmp_path: Path) -> None:
    upstream(tmp_path, "s", "command: !!python/object/apply:os.system ['true']\n")
    problem = only_problem(load(tmp_path))
    assert problem.reason.startswith("invalid YAML")
    assert problem.line == 1


def test_yml_extension_loads_and_a_duplicate_server_is_reported(tmp_path: Path) -> None:
    write(tmp_path / "upstreams" / "a.yml", "command: one\n")
    write(tmp_path / "upstreams" / "b.yml", "command: two\n")
    write(tmp_path / "upstreams" / "b.yaml", "command: three\n")
    config = load(tmp_path)
    assert {n: u.command for n, u in config.upstreams.items()} == {"a": "one", "b": "three"}
    problem = only_problem(config)
    assert Path(problem.path).name == "b.yml"
    assert "defined twice" in problem.reason


def test_other_files_and_hidden_files_are_ignored(tmp_path: Path) -> None:
    write(tmp_path / "upstreams" / "README.md", "not yaml: [")
    write(tmp_path / "upstreams" / "s.yaml.bak", "not yaml: [")
    write(tmp_path / "upstreams" / ".s.yaml", "not yaml: [")
    (tmp_path / "upstreams" / "dir.yaml").mkdir()
    write(tmp_path / "upstreams" / "s.yaml", "command: uvx\n")
    config = load(tmp_path)
    assert (list(config.upstreams), config.problems) == (["s"], [])


def test_missing_config_dir_parts_mean_an_empty_fleet_with_defaults(tmp_path: Path) -> None:
    config = load(tmp_path)
    assert (config.upstreams, config.problems, config.warnings) == ({}, [], [])
    assert config.directory == tmp_path
    assert config.toolsets == ToolsetsConfig()


def test_files_load_in_name_order(tmp_path: Path) -> None:
    for name in ["zeta", "alpha", "Mid", "beta"]:
        upstream(tmp_path, name, "command: uvx\n")
    assert list(load(tmp_path).upstreams) == ["Mid", "alpha", "beta", "zeta"]


# --- server names -----------------------------------------------------------------------------


@pytest.mark.parametrize("stem", ["a", "time", "my-server_2", "A" * 64, "0", "-", "_"])
def test_good_server_name_stems(tmp_path: Path, stem: str) -> None:
    upstream(tmp_path, stem, "command: uvx\n")
    config = load(tmp_path)
    assert (list(config.upstreams), config.problems) == ([stem], [])
    assert config.upstreams[stem].name == stem


@pytest.mark.parametrize(
    "stem",
    ["my.server", "my server", "A" * 65, "naïve", "srv\n", "a+b", "a@b", "x:y"],
    ids=["dot", "space", "too-long", "unicode", "trailing-newline", "plus", "at", "colon"],
)
def test_bad_server_name_stems_are_a_problem_for_that_file(tmp_path: Path, stem: str) -> None:
    path = upstream(tmp_path, stem, "command: uvx\n")
    upstream(tmp_path, "good", "command: uvx\n")
    config = load(tmp_path)
    assert list(config.upstreams) == ["good"]
    problem = only_problem(config)
    assert problem.path == str(path)
    assert "server name" in problem.reason


# --- command / url / transport ----------------------------------------------------------------


def test_stdio_defaults(tmp_path: Path) -> None:
    upstream(tmp_path, "s", "command: uvx\n")
    server = load(tmp_path).upstreams["s"]
    assert server.is_stdio
    assert (server.args, server.env, server.cwd, server.url, server.transport) == ((), {}, None, None, None)
    assert (server.enabled, server.timeout, server.connect_timeout) == (True, 300, 60)
    assert (server.tools.include, server.tools.exclude) == ((), ())


def test_args_and_env_values_become_strings(tmp_path: Path) -> None:
    upstream(tmp_path, "s", "command: uvx\nargs: [--port, 8080, true]\nenv: {N: 5, EMPTY: , B: false}\n")
    server = load(tmp_path).upstreams["s"]
    assert server.args == ("--port", "8080", "True")
    assert server.env == {"N": "5", "EMPTY": "", "B": "False"}


def test_remote_upstream(tmp_path: Path) -> None:
    upstream(tmp_path, "r", """
        url: https://mcp.example.com/mcp
        transport: sse
        enabled: false
        timeout: 12.5
        connect_timeout: 5
        tools: {include: ["get_*"], exclude: [get_secret]}
    """)
    server = load(tmp_path).upstreams["r"]
    assert not server.is_stdio
    assert (server.transport, server.enabled, server.timeout, server.connect_timeout) == ("sse", False, 12.5, 5)
    assert (server.tools.include, server.tools.exclude) == (("get_*",), ("get_secret",))


def test_transport_defaults_to_none_meaning_streamable_http_with_sse_fallback(tmp_path: Path) -> None:
    upstream(tmp_path, "r", "url: https://x/mcp\n")
    assert load(tmp_path).upstreams["r"].transport is None


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_valid_transports(tmp_path: Path, transport: str) -> None:
    upstream(tmp_path, "r", f"url: https://x/mcp\ntransport: {transport}\n")
    assert load(tmp_path).upstreams["r"].transport == transport


@pytest.mark.parametrize("transport", ["websocket", "http", "stdio", "SSE", "1"])
def test_invalid_transport_points_at_its_line(tmp_path: Path, transport: str) -> None:
    upstream(tmp_path, "r", f"url: https://x/mcp\n\ntransport: {transport}\n")
    problem = only_problem(load(tmp_path))
    assert problem.reason.startswith("transport:")
    assert problem.line == 3


def test_transport_with_a_command_is_a_problem(tmp_path: Path) -> None:
    upstream(tmp_path, "s", "command: uvx\ntransport: sse\n")
    problem = only_problem(load(tmp_path))
    assert problem.reason == "transport: 'transport' applies to 'url' upstreams only"
    assert problem.line == 2


def test_both_command_and_url_is_a_problem(tmp_path: Path) -> None:
    upstream(tmp_path, "s", "command: uvx\nurl: https://x/mcp\n")
    problem = only_problem(load(tmp_path))
    assert "exclusive" in problem.reason
    assert problem.line == 2


@pytest.mark.parametrize("text", ["args: [x]\n", "enabled: true\n", "{}\n"])
def test_neither_command_nor_url_is_a_problem(tmp_path: Path, text: str) -> None:
    upstream(tmp_path, "s", text)
    problem = only_problem(load(tmp_path))
    assert problem.reason == "one of 'command' (stdio) or 'url' (remote) is required"
    assert "Value error" not in str(problem)


def test_upstream_config_is_frozen() -> None:
    server = UpstreamConfig(name="s", command="uvx")
    with pytest.raises(ValidationError):
        server.command = "other"  # type: ignore[misc]


def test_problem_messages_never_echo_credentials(tmp_path: Path) -> None:
    upstream(tmp_path, "s", 'url: https://x/mcp\nheaders: {Authorization: "Bearer ${TOKEN}"}\ntimeout: x\n')
    problem = only_problem(load(tmp_path, {"TOKEN": "hunter2-secret"}))
    assert "hunter2" not in str(problem)


# --- tool_search: lenient parsing -------------------------------------------------------------


def test_yaml_1_1_booleans_really_are_booleans() -> None:
    """The premise of the switch tests below: SafeLoader resolves these bare words to bools."""
    parsed = yaml.safe_load("a: on\nb: off\nc: yes\nd: no\ne: On\nf: OFF\ng: y\nh: n\n")
    assert parsed == {"a": True, "b": False, "c": True, "d": False, "e": True, "f": False, "g": "y", "h": "n"}


@pytest.mark.parametrize("key", ["enabled", "listing"])
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("auto", "auto"), ("AUTO", "auto"), ('" auto "', "auto"),
        ("on", "on"), ("On", "on"), ("ON", "on"), ('"on"', "on"), ("yes", "on"), ("true", "on"),
        ("True", "on"), ("1", "on"), ('"1"', "on"), ('"yes"', "on"),
        ("off", "off"), ("Off", "off"), ("OFF", "off"), ('"off"', "off"), ("no", "off"), ("false", "off"),
        ("0", "off"), ('"0"', "off"), ('"no"', "off"), ('"FALSE"', "off"),
    ],
)
def test_switches(key: str, value: str, expected: str) -> None:
    settings, warnings = tool_search_yaml(f"tool_search:\n  {key}: {value}\n")
    assert getattr(settings, key) == expected
    assert warnings == []


@pytest.mark.parametrize("key", ["enabled", "listing"])
@pytest.mark.parametrize("value", ["lots", "2", "-1", "1.0", "y", "[on]", "{a: 1}", "''", "~"])
def test_bad_switch_falls_back_to_auto_with_a_warning(key: str, value: str) -> None:
    settings, warnings = tool_search_yaml(f"tool_search:\n  {key}: {value}\n")
    assert getattr(settings, key) == "auto"
    assert len(warnings) == 1
    assert f"tool_search.{key}" in warnings[0]


def test_enabled_off_and_listing_off_as_bare_yaml() -> None:
    settings, warnings = tool_search_yaml("tool_search:\n  enabled: off\n  listing: off\n")
    assert (settings.enabled, settings.listing, warnings) == ("off", "off", [])


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("on", "on"), ("yes", "on"), ("true", "on"), ("1", "on"), ('"ON"', "on"), ('"yes"', "on"),
        ("off", "off"), ("no", "off"), ("false", "off"), ("0", "off"), ('"Off"', "off"),
        ("auto", "auto"), ('"AUTO"', "auto"),
    ],
)
def test_semantic_switch_reads_like_the_other_switches(value: str, expected: str) -> None:
    settings, warnings = tool_search_yaml(f"tool_search:\n  semantic: {value}\n")
    assert (settings.semantic, warnings) == (expected, [])


@pytest.mark.parametrize("value", ["lots", "2", "[on]", "~", "''"])
def test_bad_semantic_value_falls_back_to_auto_with_a_warning(value: str) -> None:
    settings, warnings = tool_search_yaml(f"tool_search:\n  semantic: {value}\n")
    assert settings.semantic == "auto"
    assert len(warnings) == 1 and "tool_search.semantic" in warnings[0] and "'auto'" in warnings[0]


def test_semantic_is_auto_by_default_and_in_the_legacy_form() -> None:
    """Issue 23: the default user gets the hybrid ranking wherever the extra is installed."""
    assert DEFAULTS.semantic == "auto"
    assert parse_tool_search(True)[0].semantic == "auto"


NUMERIC = {
    "threshold_pct": (0, 100),
    "listing_max_tokens": (200, 60000),
    "max_search_limit": (1, 50),
}


@pytest.mark.parametrize("key", sorted(NUMERIC))
def test_numbers_in_range_are_kept_without_warning(key: str) -> None:
    low, high = NUMERIC[key]
    for number in (low, high, (low + high) // 2):
        settings, warnings = parse_tool_search({key: number})
        assert (getattr(settings, key), warnings) == (number, [])


@pytest.mark.parametrize("key", sorted(NUMERIC))
def test_numbers_below_range_clamp_to_the_minimum(key: str) -> None:
    low, _ = NUMERIC[key]
    for number in (low - 1, -5, -(10**9)):
        settings, warnings = parse_tool_search({key: number})
        assert getattr(settings, key) == low
        assert any(f"tool_search.{key}" in w and "outside" in w for w in warnings)


@pytest.mark.parametrize("key", sorted(NUMERIC))
def test_numbers_above_range_clamp_to_the_maximum(key: str) -> None:
    _, high = NUMERIC[key]
    for number in (high + 1, 10**12):
        settings, warnings = parse_tool_search({key: number})
        assert getattr(settings, key) == high
        assert any(f"tool_search.{key}" in w and "outside" in w for w in warnings)


@pytest.mark.parametrize("key", [*sorted(NUMERIC), "search_default_limit"])
@pytest.mark.parametrize("value", ["lots", "yes", "no", "on", "off", "true", "''", "~", "[5]", "{a: 1}",
                                   '"5%"', ".nan", "1e999"])
def test_non_numbers_fall_back_to_the_default_with_a_warning(key: str, value: str) -> None:
    settings, warnings = tool_search_yaml(f"tool_search:\n  {key}: {value}\n")
    assert getattr(settings, key) == getattr(DEFAULTS, key)
    assert len(warnings) == 1
    assert f"tool_search.{key}" in warnings[0]


@pytest.mark.parametrize(
    ("value", "expected"),
    [("7.9", 7), ("7.0", 7), ('"12"', 12), ('" 12 "', 12), ('"3.5"', 3), ("1e1", 10), ("0x10", 16)],
)
def test_numbers_are_parsed_leniently(value: str, expected: int) -> None:
    settings, warnings = tool_search_yaml(f"tool_search:\n  threshold_pct: {value}\n")
    assert (settings.threshold_pct, warnings) == (expected, [])


def test_float_below_range_clamps() -> None:
    settings, warnings = parse_tool_search({"listing_max_tokens": 0.5, "threshold_pct": 150.7})
    assert (settings.listing_max_tokens, settings.threshold_pct) == (200, 100)
    assert len(warnings) == 2


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"search_default_limit": 10}, 10),
        ({"search_default_limit": 0}, 1),
        ({"search_default_limit": -3}, 1),
        ({"search_default_limit": 26}, 25),
        ({"search_default_limit": 30, "max_search_limit": 40}, 30),
        ({"search_default_limit": 30, "max_search_limit": 10}, 10),
        ({"search_default_limit": 30, "max_search_limit": 99}, 30),
        ({"search_default_limit": 60, "max_search_limit": 99}, 50),
        ({"max_search_limit": 3}, 3),
        ({"max_search_limit": 0}, 1),
        ({"search_default_limit": 8, "max_search_limit": "lots"}, 8),
        ({"search_default_limit": "lots", "max_search_limit": 2}, 2),
    ],
)
def test_search_default_limit_is_clamped_to_max_search_limit(raw: dict[str, Any], expected: int) -> None:
    settings, _ = parse_tool_search(raw)
    assert settings.search_default_limit == expected
    assert 1 <= settings.search_default_limit <= settings.max_search_limit <= 50


def test_max_search_limit_lowering_the_default_limit_does_not_warn_about_the_default() -> None:
    settings, warnings = parse_tool_search({"max_search_limit": 3})
    assert (settings.search_default_limit, warnings) == (3, [])


def test_unknown_keys_warn_and_are_ignored() -> None:
    settings, warnings = parse_tool_search({"enabeld": "off", "listing": "off", 7: "x", True: 1})
    assert settings == DEFAULTS.model_copy(update={"listing": "off"})
    assert len(warnings) == 3
    assert any("enabeld" in w and "unknown" in w for w in warnings)


def test_every_setting_at_once() -> None:
    settings, warnings = tool_search_yaml("""
        tool_search:
          enabled: on
          threshold_pct: 10
          listing: "off"
          listing_max_tokens: 8000
          search_default_limit: 7
          max_search_limit: 30
    """)
    assert warnings == []
    assert settings == ToolSearchSettings(
        enabled="on", threshold_pct=10, listing="off", listing_max_tokens=8000,
        search_default_limit=7, max_search_limit=30,
    )


def test_many_bad_values_each_warn_and_nothing_raises() -> None:
    settings, warnings = parse_tool_search({
        "enabled": "lots", "threshold_pct": -1, "listing": 3, "listing_max_tokens": 10**9,
        "search_default_limit": "many", "max_search_limit": True, "extra": 1,
    })
    assert settings == DEFAULTS.model_copy(update={"threshold_pct": 0, "listing_max_tokens": 60000})
    assert len(warnings) == 7


@pytest.mark.parametrize(
    ("text", "enabled", "warned"),
    [
        ("tool_search: false", "off", False),
        ("tool_search: off", "off", False),   # YAML 1.1: a bare off *is* the literal false
        ("tool_search: no", "off", False),
        ("tool_search: true", "auto", False),
        ("tool_search: on", "auto", False),
        ("tool_search:", "auto", False),
        ('tool_search: "false"', "auto", True),
        ('tool_search: "off"', "auto", True),
        ("tool_search: 0", "auto", True),
        ("tool_search: lots", "auto", True),
        ("tool_search: [a]", "auto", True),
    ],
)
def test_legacy_boolean_form_only_false_means_off(text: str, enabled: str, warned: bool) -> None:
    settings, warnings = parse_tool_search(yaml.safe_load(text)["tool_search"])
    assert settings == DEFAULTS.model_copy(update={"enabled": enabled})
    assert bool(warnings) is warned


def test_none_means_defaults() -> None:
    assert parse_tool_search(None) == (DEFAULTS, [])
    assert parse_tool_search({}) == (DEFAULTS, [])


# --- toolsets.yaml ----------------------------------------------------------------------------


def test_absent_toolsets_yaml_means_defaults(tmp_path: Path) -> None:
    config = load(tmp_path)
    assert config.toolsets.core == ()
    assert config.toolsets.toolsets == {}
    assert list(config.toolsets.profiles) == ["default"]
    assert config.toolsets.profiles["default"].toolsets == ("all",)
    assert config.toolsets.profiles["default"].disabled == ()
    assert config.toolsets.profiles["default"].context_tokens is None
    assert config.toolsets.startup_wait == 3.0
    assert config.toolsets.tool_search == DEFAULTS


@pytest.mark.parametrize("text", ["", "# only a comment\n", "core:\ntoolsets:\nprofiles:\n"])
def test_empty_toolsets_yaml_means_defaults(tmp_path: Path, text: str) -> None:
    write(tmp_path / "toolsets.yaml", text)
    config = load(tmp_path)
    assert (config.problems, config.toolsets) == ([], ToolsetsConfig())


def test_full_toolsets_yaml(tmp_path: Path) -> None:
    for name in ("time", "git", "fetch"):
        upstream(tmp_path, name, f"command: mcp-server-{name}\n")
    write(tmp_path / "toolsets.yaml", """
        core: [time__get_current_time, "git__*"]
        toolsets:
          research: {description: "Look things up", tools: [fetch__fetch], includes: [mcp-git]}
          empty:
        profiles:
          default: {toolsets: [all], disabled: [], context_tokens: null}
          cursor:  {match: "cursor*", toolsets: [research], context_tokens: 128000}
        startup_wait: 0.5
        tool_search:
          enabled: off
          threshold_pct: 7
    """)
    config = load(tmp_path)
    assert (config.problems, config.warnings) == ([], [])
    toolsets = config.toolsets
    assert toolsets.core == ("time__get_current_time", "git__*")
    assert toolsets.toolsets["research"].tools == ("fetch__fetch",)
    assert toolsets.toolsets["research"].includes == ("mcp-git",)
    assert toolsets.toolsets["research"].description == "Look things up"
    assert toolsets.toolsets["empty"].tools == ()
    assert toolsets.profiles["cursor"] == ProfileConfig(match="cursor*", toolsets=("research",),
                                                        context_tokens=128000)
    assert toolsets.startup_wait == 0.5
    assert (toolsets.tool_search.enabled, toolsets.tool_search.threshold_pct) == ("off", 7)


def test_default_profile_is_added_when_missing(tmp_path: Path) -> None:
    write(tmp_path / "toolsets.yaml", "profiles:\n  cursor: {match: 'cursor*'}\n")
    profiles = load(tmp_path).toolsets.profiles
    assert sorted(profiles) == ["cursor", "default"]
    assert profiles["default"] == ProfileConfig()


def test_default_profile_is_added_without_mutating_the_callers_mapping() -> None:
    given = {"cursor": ProfileConfig(match="cursor*")}
    config = ToolsetsConfig(profiles=given)
    assert sorted(config.profiles) == ["cursor", "default"]
    assert list(given) == ["cursor"]


def test_an_empty_default_profile_entry_means_the_default_profile(tmp_path: Path) -> None:
    write(tmp_path / "toolsets.yaml", "profiles:\n  default:\n")
    config = load(tmp_path)
    assert (config.problems, config.toolsets.profiles) == ([], {"default": ProfileConfig()})


def test_tool_search_warnings_are_returned_and_the_rest_still_loads(tmp_path: Path) -> None:
    upstream(tmp_path, "a", "command: a\n")
    write(tmp_path / "toolsets.yaml", """
        core: [a__b]
        tool_search:
          enabled: lots
          threshold_pct: 900
          colour: blue
    """)
    config = load(tmp_path)
    assert config.problems == []
    assert config.toolsets.core == ("a__b",)
    assert config.toolsets.tool_search.threshold_pct == 100
    assert config.toolsets.tool_search.enabled == "auto"
    assert len(config.warnings) == 3


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("core: [a\nprofiles: {}\n", 2, "invalid YAML"),
        ("core: []\nprofils: {}\n", 2, "profils: unknown field"),
        ("profiles:\n  cursor:\n    toolset: [x]\n", 3, "profiles.cursor.toolset: unknown field"),
        ("profiles:\n  cursor:\n    context_tokens: -1\n", 3, "profiles.cursor.context_tokens"),
        ("core: []\nstartup_wait: -1\n", 2, "startup_wait"),
        ("toolsets:\n  t: {tools: [a], inclues: [b]}\n", 2, "toolsets.t.inclues: unknown field"),
        ("- a\n- b\n", 1, "expected a mapping"),
        ("on: [a]\n", 1, "unknown field"),
    ],
)
def test_malformed_toolsets_yaml_is_reported_and_upstreams_still_load(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    path = write(tmp_path / "toolsets.yaml", text)
    upstream(tmp_path, "s", "command: uvx\n")
    config = load(tmp_path)
    assert list(config.upstreams) == ["s"]
    assert config.toolsets == ToolsetsConfig()
    problem = only_problem(config)
    assert problem.path == str(path)
    assert fragment in problem.reason
    assert problem.line == line


def test_toolsets_config_is_frozen() -> None:
    with pytest.raises(ValidationError):
        ToolsetsConfig().core = ("x",)  # type: ignore[misc]


# --- names that resolve to nothing: a typo is an error with its line, never an empty profile ---


def dangling(tmp_path: Path, toolsets_yaml: str, servers: tuple[str, ...] = ("time", "git")) -> list[str]:
    for name in servers:
        upstream(tmp_path, name, f"command: mcp-server-{name}\n")
    write(tmp_path / "toolsets.yaml", toolsets_yaml)
    problems = load(tmp_path).problems
    assert all(isinstance(p, DanglingName) for p in problems)
    return [str(p).removeprefix(f"{tmp_path / 'toolsets.yaml'}:") for p in problems]


def test_a_misspelt_toolset_in_a_profile_is_an_error_at_its_line(tmp_path: Path) -> None:
    problems = dangling(tmp_path, "profiles:\n  default: {toolsets: [nosuchset]}\n")
    assert problems == ["2: profiles.default.toolsets.0: unknown toolset 'nosuchset'; known: all, git, time"]


def test_unknown_names_in_includes_disabled_and_core_are_errors(tmp_path: Path) -> None:
    problems = dangling(tmp_path, """
        core: [tme__get_current_time, "gti__*", time__get_current_time, "git__*", "*_status"]
        toolsets:
          work:
            includes: [mcp-time, gitt]
            tools: [fech__fetch]
        profiles:
          cursor: {toolsets: [work], disabled: [mcp-tme]}
    """)
    assert sorted(problems) == sorted([
        "1: core.0: 'tme__get_current_time' names no configured server (a tool is `<server>__<tool>`)",
        "1: core.1: 'gti__*' names no configured server (a tool is `<server>__<tool>`)",
        "4: toolsets.work.includes.1: unknown toolset 'gitt'; known: all, git, time, work",
        "5: toolsets.work.tools.0: 'fech__fetch' names no configured server (a tool is `<server>__<tool>`)",
        "7: profiles.cursor.disabled.0: unknown toolset 'mcp-tme'; known: all, git, time, work",
    ])


def test_servers_toolsets_and_their_aliases_are_known_names(tmp_path: Path) -> None:
    assert dangling(tmp_path, """
        core: [time__get_current_time]
        toolsets:
          work: {includes: [git, mcp-time, "*"], tools: ["git__git_*"]}
        profiles:
          default: {toolsets: [all], disabled: [mcp-git]}
          cursor: {toolsets: [work, time]}
    """) == []


def test_a_broken_upstream_file_still_names_its_server(tmp_path: Path) -> None:
    upstream(tmp_path, "broken", "command: [unclosed\n")
    write(tmp_path / "toolsets.yaml", "profiles:\n  default: {toolsets: [broken]}\n")
    problems = load(tmp_path).problems
    assert [type(p) for p in problems] == [ConfigError]


def test_unprefixed_servers_make_bare_core_names_acceptable(tmp_path: Path) -> None:
    upstream(tmp_path, "fs", "command: fs\nprefix: false\n")
    write(tmp_path / "toolsets.yaml", "core: [read_file]\n")
    assert load(tmp_path).problems == []


def test_check_reports_a_typo_once_with_its_line_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from proxy.cli import main

    upstream(tmp_path, "time", "command: mcp-server-time\n")
    write(tmp_path / "toolsets.yaml", "profiles:\n  default: {toolsets: [nosuchset]}\n")
    assert main(["check", "--config-dir", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out.strip() == "1 upstream(s) valid, 1 problem(s)"
    assert err.count("nosuchset") == 1 and "toolsets.yaml:2:" in err


def test_check_judges_core_tools_by_the_names_overrides_give_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A renamed tool is named by its new name in toolsets.yaml; its upstream name no longer names it."""
    from mcp import types

    from proxy.app import cache_dir
    from proxy.cli import main
    from proxy.upstream import DiskCatalogCache

    upstream(tmp_path, "chat", f"command: {sys.executable}\noverrides:\n  acme_post: {{name: post}}\n")
    write(tmp_path / "toolsets.yaml", "core: [chat__post, chat__acme_post]\n")
    config = load(tmp_path)
    tool = types.Tool(name="acme_post", input_schema={"type": "object"})
    DiskCatalogCache(cache_dir(config) / "catalogs").store(config.upstreams["chat"], [tool])
    assert main(["check", "--config-dir", str(tmp_path)]) == 1
    _, err = capsys.readouterr()
    assert err.splitlines() == [f"error: {tmp_path / 'toolsets.yaml'}:1: core.1: 'chat__acme_post' names no tool of "
                                "server chat (1 tools); did you mean 'chat__post'?"]


def test_every_validation_error_of_a_file_is_named_with_its_line(tmp_path: Path) -> None:
    upstream(tmp_path, "a", "command: a\ntimeout: -1\nbogus: 1\n")
    (problem,) = load(tmp_path).problems
    assert problem.line == 2
    assert "timeout:" in problem.reason and "line 3: bogus: unknown field" in problem.reason


# --- hot reload: the last good settings of a file that broke ---------------------------------


def test_a_broken_file_keeps_its_last_good_settings_and_a_deleted_one_is_gone(tmp_path: Path) -> None:
    from proxy.config import keep_last_good

    (tmp_path / "upstreams").mkdir()
    for name in ("kept", "broken", "deleted"):
        (tmp_path / "upstreams" / f"{name}.yaml").write_text(f"command: {name}-server\n")
    (tmp_path / "toolsets.yaml").write_text("core: [kept__a]\n")
    previous = load_config(tmp_path, environ={})
    (tmp_path / "upstreams" / "broken.yaml").write_text("command: [oops\n")
    (tmp_path / "upstreams" / "deleted.yaml").unlink()
    (tmp_path / "toolsets.yaml").write_text("core: {not: a list}\n")
    merged = keep_last_good(previous, load_config(tmp_path, environ={}))
    assert sorted(merged.upstreams) == ["broken", "kept"]
    assert merged.upstreams["broken"].command == "broken-server"
    assert merged.toolsets.core == ("kept__a",)
    assert {Path(p.path).name for p in merged.problems} == {"broken.yaml", "toolsets.yaml"}


def test_a_reload_says_last_good_settings_only_of_files_that_had_loaded(tmp_path: Path) -> None:
    from proxy.config import reload_note

    upstream(tmp_path, "kept", "command: kept-server\n")
    write(tmp_path / "toolsets.yaml", "profiles:\n  default: {toolsets: [nosuchset]}\n")  # loads, with a typo
    previous = load_config(tmp_path, environ={})
    upstream(tmp_path, "kept", "command: [oops\n")
    upstream(tmp_path, "new", "command: [oops\n")
    write(tmp_path / "toolsets.yaml", "core: {not: a list}\n")
    notes = {Path(p.path).name: reload_note(previous, p) for p in load_config(tmp_path, environ={}).problems}
    assert notes == {"kept.yaml": "the last good settings stay in force",
                     "new.yaml": "this file is skipped; everything else runs",
                     "toolsets.yaml": "the last good settings stay in force"}
    broken_from_the_start = Config(tmp_path, problems=[ConfigError(str(tmp_path / "toolsets.yaml"), "invalid")])
    assert reload_note(broken_from_the_start, ConfigError(str(tmp_path / "toolsets.yaml"), "invalid")) == \
        "this file is skipped; everything else runs"


def test_interpolation_defaults_and_the_values_it_used() -> None:
    from proxy.config import interpolate

    used: set[str] = set()
    value = interpolate({"a": "${SET:-x}", "b": ["${UNSET:-fallback}", "${env:SET}"]}, {"SET": "value"}, (), used)
    assert value == {"a": "value", "b": ["fallback", "value"]}
    assert used == {"value"}
