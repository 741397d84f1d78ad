"""The `toolbridge` command; `_commands` holds its subcommands.

This module imports nothing heavy: `toolbridge --version` answers before the SDK, pydantic and the
rest load (about a second).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments == ["--version"]:
        from proxy import __version__

        print(f"toolbridge {__version__}")
        return 0
    from proxy.cli._commands import main as run

    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
