"""toolbridge inside toolbridge: an upstream that runs toolbridge, and the chain of config dirs served.

A client config that already holds toolbridge, imported into toolbridge, makes an upstream that starts
toolbridge on the same config dir, which starts it again, without end. Three guards stop that: the
importer skips any entry that runs toolbridge (`runs_toolbridge`), loading a config dir refuses an
upstream that would serve that same dir (`served_config_dir`), and a `serve` refuses to run where its
own config dir is already being served further up the chain of processes (`SERVING`), which also
catches what no reading of a command line can, such as a cycle through a second config dir.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from proxy.config._models import UpstreamConfig

__all__ = ["SERVING", "chain_marker", "enter_chain", "runs_toolbridge", "served_config_dir", "serves_itself",
           "serving_chain"]

# The realpaths of the config dirs served by the toolbridge processes above this one, `:`-separated.
SERVING = "TOOLBRIDGE_SERVING"

_PYTHON = re.compile(r"python[0-9.]*(?:\.exe)?")
_LAUNCHERS = {"uvx", "uv", "pipx", "env", "pdm", "poetry", "hatch", "rye", "conda", "mamba"}
_SHELLS = {"sh", "bash", "zsh", "dash", "fish"}
_OPERATORS = {";", "&&", "||", "|"}
# `toolbridge`, `toolbridge==0.1.0`, `toolbridge[semantic]>=0.1`, `toolbridge@latest`, a built wheel.
_PACKAGE = re.compile(r"toolbridge(?:\[[^\]]*\])?(?:[=<>!~@].*)?|.*/?toolbridge-[^/]*\.(?:whl|tar\.gz)")
_MODULES = {"proxy", "proxy.cli"}


def _name(word: str) -> str:
    return Path(word).name.lower().removesuffix(".exe")


def _runs_module(words: Sequence[str]) -> bool:
    """`python -m proxy` (or `-mproxy`), run by a Python or a launcher (`uv run python -m proxy`)."""
    if not any(_PYTHON.fullmatch(_name(word)) or _name(word) in _LAUNCHERS for word in words):
        return False
    for word, after in zip(words, [*words[1:], ""], strict=True):
        module = after if word == "-m" else word[2:] if word.startswith("-m") else None
        if module in _MODULES:
            return True
    return False


def _segments(script: str) -> list[list[str]]:
    """A shell script's simple commands (split at `;`, `&&`, `||`, `|`), each without a leading `exec`."""
    try:
        words = shlex.split(script)
    except ValueError:
        words = script.split()
    segments: list[list[str]] = [[]]
    for word in words:
        if word in _OPERATORS:
            segments.append([])
        elif word != "exec" or segments[-1]:
            segments[-1].append(word)
    return [segment for segment in segments if segment]


def runs_toolbridge(command: str, args: Sequence[str]) -> bool:
    """Whether a stdio command line starts toolbridge, whatever its arguments.

    Recognised: the `toolbridge` command by name or any path (a venv's `bin/toolbridge`), `python -m
    proxy`, a launcher given the package (`uvx [--from X] toolbridge`, `pipx run toolbridge`, `uv run
    toolbridge`, `env A=1 toolbridge`), and a shell's `-c` script doing any of these. A path that merely
    ends in a `toolbridge` directory (a filesystem server's root) is an argument, not a command.
    """
    if _name(command) == "toolbridge" or _runs_module([command, *args]):
        return True
    if _name(command) in _SHELLS and "-c" in args[:-1]:
        return any(runs_toolbridge(words[0], words[1:]) for words in _segments(args[args.index("-c") + 1]))
    if _name(command) not in _LAUNCHERS:
        return False
    return any(_PACKAGE.fullmatch(arg) or (Path(arg).name == "toolbridge" and Path(arg).parent.name == "bin")
               for arg in args)


def _config_dir_argument(args: Sequence[str]) -> str | None:
    for index, arg in enumerate(args):
        if arg == "--config-dir" and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith("--config-dir="):
            return arg.removeprefix("--config-dir=")
    return None


def served_config_dir(command: str, args: Sequence[str], env: Mapping[str, str], cwd: Path) -> Path | None:
    """The config dir a stdio command line would serve if it runs toolbridge (its realpath), else None.

    toolbridge serves `--config-dir`, else `TOOLBRIDGE_HOME`, else its working directory: the `cwd` the
    child is given (for an upstream, the config dir itself unless its file says otherwise).
    """
    if not runs_toolbridge(command, args):
        return None
    given = _config_dir_argument(args) or env.get("TOOLBRIDGE_HOME") or "."
    return Path(os.path.realpath(cwd / Path(given).expanduser()))


def serves_itself(upstream: UpstreamConfig, directory: Path) -> bool:
    """Whether a stdio upstream of the config dir `directory` runs toolbridge on that same dir."""
    if upstream.command is None:
        return False
    cwd = directory / (upstream.cwd or ".")
    served = served_config_dir(upstream.command, upstream.args, upstream.env, cwd)
    return served == Path(os.path.realpath(directory))


def serving_chain(environ: Mapping[str, str]) -> list[Path]:
    """The config dirs served by the toolbridge processes this one runs under, outermost first."""
    return [Path(part) for part in environ.get(SERVING, "").split(os.pathsep) if part]


def enter_chain(environ: Mapping[str, str], directory: Path) -> dict[str, str]:
    """The `SERVING` entry for a toolbridge serving `directory`: the chain it runs under, plus itself."""
    return {SERVING: os.pathsep.join([*map(str, serving_chain(environ)), os.path.realpath(directory)])}


def chain_marker(environ: Mapping[str, str]) -> dict[str, str]:
    """What a stdio child inherits of the chain (it gets none of the rest of our environment)."""
    return {SERVING: environ[SERVING]} if SERVING in environ else {}
