"""What a stdio child sees of toolbridge's environment: network, CA, package-manager and locale settings,
secrets only when configured (SPEC §8.1); `env_passthrough`/`env_block` per upstream."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from servers.harness import running_fleet, stdio_config

from proxy.config import UpstreamConfig, load_config
from proxy.upstream.connection._environment import child_environment

pytestmark = pytest.mark.anyio

CORPORATE = {
    "HTTPS_PROXY": "http://proxy:3128", "http_proxy": "http://proxy:3128", "NO_PROXY": "localhost",
    "no_proxy": "localhost", "SSL_CERT_FILE": "/etc/ca.pem", "SSL_CERT_DIR": "/etc/certs",
    "NODE_EXTRA_CA_CERTS": "/etc/ca.pem", "REQUESTS_CA_BUNDLE": "/etc/ca.pem", "CURL_CA_BUNDLE": "/etc/ca.pem",
    "UV_INDEX_URL": "https://pypi.corp/simple", "NPM_CONFIG_REGISTRY": "https://npm.corp",
    "npm_config_cafile": "/etc/ca.pem", "PIP_INDEX_URL": "https://pypi.corp/simple", "LANG": "de_DE.UTF-8",
    "LC_ALL": "de_DE.UTF-8", "TMPDIR": "/scratch", "XDG_CACHE_HOME": "/cache", "PATH": "/usr/bin",
}
SECRETS = {"GITHUB_TOKEN": "t", "AWS_SECRET_ACCESS_KEY": "s", "OPENAI_API_KEY": "k", "UV_INDEX_PASSWORD": "p",
           "NPM_CONFIG__AUTHTOKEN": "a", "PGPASSWORD": "p"}
OTHER = {"EDITOR": "vim", "CORP_MIRROR": "https://mirror.corp", "BASH_FUNC_x%%": "() { :; }"}


def child(**settings: object) -> dict[str, str]:
    config = UpstreamConfig(name="x", command="server", **settings)  # type: ignore[arg-type]
    return child_environment(config, {**CORPORATE, **SECRETS, **OTHER})


def test_network_ca_package_manager_and_locale_settings_pass_and_nothing_else_does() -> None:
    assert child() == CORPORATE


def test_passthrough_adds_names_and_globs_even_secret_looking_ones() -> None:
    seen = child(env_passthrough=("GITHUB_TOKEN", "CORP_*"))
    assert seen == {**CORPORATE, "GITHUB_TOKEN": "t", "CORP_MIRROR": "https://mirror.corp"}


def test_block_wins_over_defaults_and_passthrough_and_env_wins_over_both() -> None:
    seen = child(env_passthrough=("CORP_*",), env_block=("CORP_MIRROR", "LC_*", "HTTPS_PROXY"),
                 env={"HTTPS_PROXY": "http://other:8080"})
    assert "CORP_MIRROR" not in seen and "LC_ALL" not in seen
    assert seen["HTTPS_PROXY"] == "http://other:8080" and seen["LANG"] == "de_DE.UTF-8"


def test_a_pattern_that_is_not_a_variable_name_is_a_config_error_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "upstreams").mkdir()
    (tmp_path / "upstreams" / "x.yaml").write_text("command: server\nenv_passthrough: [OK, 'BAD NAME']\n")
    (tmp_path / "upstreams" / "y.yaml").write_text("command: server\nenv_passthru: [A]\n")
    problems = {Path(problem.path).name: problem for problem in load_config(tmp_path, environ={}).problems}
    assert "not a variable name" in problems["x.yaml"].reason and problems["x.yaml"].line == 2
    assert (problems["y.yaml"].reason, problems["y.yaml"].line) == ("env_passthru: unknown field", 2)


async def test_a_real_stdio_child_gets_the_proxy_settings_but_not_the_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {**CORPORATE, **SECRETS, "CORP_MIRROR": "https://mirror.corp"}.items():
        monkeypatch.setenv(name, value)
    config = stdio_config("a", env_passthrough=("CORP_*",), env={"GREETING": "hello"})
    async with running_fleet([config], tmp_path) as (fleet, _):
        with anyio.fail_after(20):
            await fleet.ready.wait()
        result = await fleet.call_tool("a", "environment", {})
    seen = json.loads(result.content[0].text)["env"]  # type: ignore[union-attr]
    for name, value in CORPORATE.items():
        assert seen.get(name) == value, name
    assert seen["CORP_MIRROR"] == "https://mirror.corp" and seen["GREETING"] == "hello"
    assert not set(SECRETS) & set(seen)
