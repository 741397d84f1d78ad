"""YAML files whose problems point at a line: the node tree is kept beside the data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from proxy.errors import ConfigError

# libyaml's parser where PyYAML was built with it (the Python one is ~10x slower; a hundred upstream
# files are parsed at every start); the data is constructed by PyYAML's safe constructor either way.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    """Parse a YAML file, keeping the node tree so errors can point at a line.

    Raises:
        ConfigError: the file cannot be read or is not valid YAML.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), f"cannot read file: {exc}") from exc
    try:
        node = yaml.compose(text, Loader=_LOADER)
        data = _LOADER("").construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(str(path), f"invalid YAML: {problem}", mark.line + 1 if mark else None) from exc
    return data, node


def _is_key(node: yaml.Node, key: Any) -> bool:
    if not isinstance(node, yaml.ScalarNode):
        return False
    if isinstance(key, str):
        return node.tag == "tag:yaml.org,2002:str" and node.value == key
    try:  # a YAML 1.1 key like `on` or `1` was constructed to a bool or int
        value = yaml.SafeLoader("").construct_object(node)
    except yaml.YAMLError:
        return False
    return bool(value == key)  # pydantic reports a True key as 1, so compare by value


def line_of(node: yaml.Node | None, location: tuple[Any, ...]) -> int | None:
    """The 1-based line of the value at `location` in a composed YAML tree, as deep as it exists.

    A mapping entry is reported at its key's line, which is where a reader looks for it.
    """
    line = node.start_mark.line + 1 if node is not None else None
    for key in location:
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if _is_key(k, key)), None)
            if pair is None:
                break
            node, line = pair[1], pair[0].start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _describe(node: yaml.Node | None, error: Any) -> tuple[str, int | None]:
    location = tuple(error["loc"])
    location = location[1:] if location[:1] == ("name",) else location  # the file stem, not a field of the file
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] in ("extra_forbidden", "invalid_key"):
        message = "unknown field"
    if not location:
        return message, None
    return f"{'.'.join(str(part) for part in location)}: {message}", line_of(node, location)


def validation_problem(path: Path, node: yaml.Node | None, exc: ValidationError) -> ConfigError:
    """One problem for the file, at the first error's line, naming every error (each later one with its line)."""
    described = [_describe(node, error) for error in exc.errors(include_url=False)]
    (first, line), rest = described[0], described[1:]
    more = [f"line {where}: {text}" if where else text for text, where in rest]
    return ConfigError(str(path), "; ".join([first, *more]), line, mistakes=len(described))
