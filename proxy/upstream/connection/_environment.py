"""The environment a stdio child gets: what it needs to reach the network and install itself, never secrets.

`uvx`/`npx` servers behind a corporate proxy need the proxy, CA-bundle, package-manager and locale
settings of toolbridge's own environment; a variable whose name looks like a credential stays out
unless the upstream's config names it (SPEC §8.1). Per upstream, `env_passthrough` adds names or
`PREFIX_*` globs, `env_block` removes them (it wins), and `env` sets values (it wins over both).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS

from proxy.config import UpstreamConfig, chain_marker

__all__ = ["PASSED_NAMES", "PASSED_PREFIXES", "SECRET_WORDS", "child_environment"]

PASSED_NAMES = frozenset({
    *DEFAULT_INHERITED_ENV_VARS,  # HOME, LOGNAME, PATH, SHELL, TERM, USER
    "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "no_proxy", "all_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO", "GIT_SSL_CAPATH",
    "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP",
})
PASSED_PREFIXES = ("LC_", "XDG_", "UV_", "NPM_CONFIG_", "npm_config_", "PIP_")
SECRET_WORDS = ("TOKEN", "SECRET", "KEY", "PASSWORD")


def _secret(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def _passed_by_default(name: str) -> bool:
    return (name in PASSED_NAMES or name.startswith(PASSED_PREFIXES)) and not _secret(name)


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def child_environment(config: UpstreamConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` the child may see, then its configured `env` over them, then the chain of
    config dirs being served (`chain_marker`), which no config may unset.

    A value that starts with `()` (an exported shell function) is never passed, as in the SDK.
    """
    passed = {
        name: value for name, value in environ.items()
        if (_passed_by_default(name) or _matches(name, config.env_passthrough))
        and not _matches(name, config.env_block) and not value.startswith("()")
    }
    return {**passed, **config.env, **chain_marker(environ)}
