"""The `toolbridge` subcommands: serve, catalog, search, status, check, init, import, login, approve.

Output for people goes to stdout only in the one-shot commands; `serve` writes nothing but
protocol to stdout. Logs always go to stderr, redacted.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from mcp import MCPDeprecationWarning

from proxy import __version__
from proxy.app import Gateway, HttpOptions, fingerprints_path, run_gateway, serve
from proxy.cli._findings import check_problems, fleet_problems
from proxy.cli._reports import fetch_status, print_catalog, print_status
from proxy.config import SERVING, Config, Imported, enter_chain, import_client_config, load_config, serving_chain
from proxy.downstream import LOOPBACK_HOSTS, REPLICA_ID_PATTERN, bridge
from proxy.errors import DanglingName, UpstreamError, remember_secrets
from proxy.ops import (
    SafeFormatter,
    Written,
    catalog_report,
    connect_hint,
    export_traces,
    init_config_dir,
    write_upstreams,
)
from proxy.upstream import FingerprintStore, UpstreamState, login, token_store

logger = logging.getLogger("proxy")


def _setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(SafeFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("httpx2", "httpcore", "mcp", "uvicorn.error"):  # they log full URLs and per-request chatter
        logging.getLogger(noisy).setLevel(max(root.level, logging.WARNING))
    # toolbridge serves both protocol eras on purpose: the handshake-era features it relays are not news.
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)


def _config_dir(given: Path | None) -> Path:
    """`--config-dir`, else `TOOLBRIDGE_HOME`, else the working directory, made absolute here, once: a
    stdio server's working directory is resolved against it, never against where toolbridge started."""
    return (given or Path(os.environ.get("TOOLBRIDGE_HOME") or ".")).absolute()


def _is_config_dir(directory: Path) -> bool:
    return (directory / "toolsets.yaml").is_file() or (directory / "upstreams").is_dir()


def _load(args: argparse.Namespace) -> Config:
    if not args.config_dir.is_dir():
        raise SystemExit(f"toolbridge: the config dir {args.config_dir} does not exist; `toolbridge init "
                         f"{args.config_dir}` writes one (or pass --config-dir DIR, or set TOOLBRIDGE_HOME)")
    if not _is_config_dir(args.config_dir):
        raise SystemExit(f"toolbridge: {args.config_dir} is not a config dir: it has neither toolsets.yaml nor "
                         f"upstreams/; `toolbridge init {args.config_dir}` writes one (or pass --config-dir DIR, "
                         "or set TOOLBRIDGE_HOME)")
    config = load_config(args.config_dir)
    remember_secrets(config.secrets)
    if args.command == "check":  # it prints the problems itself
        return config
    for problem in config.problems:
        consequence = "" if isinstance(problem, DanglingName) else " (this file is skipped; everything else runs)"
        logger.error("config: %s%s", problem, consequence)
    for warning in config.warnings:
        logger.warning("config: toolsets.yaml: %s", warning)
    if getattr(args, "profile", None) and args.profile not in config.toolsets.profiles:
        raise SystemExit(f"toolbridge: unknown profile {args.profile!r}")
    return config


# --- serve ----------------------------------------------------------------------------------


def _auth_token(args: argparse.Namespace) -> str | None:
    return args.auth_token or os.environ.get("TOOLBRIDGE_AUTH_TOKEN") or None


def _refuse_unsafe_http(args: argparse.Namespace, config: Config, token: str | None) -> None:
    """HTTP serving must never lose the endpoint's auth to a config mistake."""
    toolsets = str(config.directory / "toolsets.yaml")
    if any(problem.path == toolsets and not isinstance(problem, DanglingName) for problem in config.problems):
        raise SystemExit("toolbridge: toolsets.yaml is invalid (see above); not serving HTTP without its settings")
    auth = config.toolsets.auth
    if auth is not None and token:
        raise SystemExit("toolbridge: toolsets.yaml has 'auth:' (OAuth); drop --auth-token/TOOLBRIDGE_AUTH_TOKEN")
    if auth is not None and auth.profile_claim and args.profile:
        raise SystemExit(f"toolbridge: profiles follow the '{auth.profile_claim}' claim; drop --profile")


def _refuse_nesting(directory: Path) -> None:
    """Exit if a toolbridge up the chain of processes already serves this config dir: an upstream there
    runs toolbridge on it (directly, or through another config dir), and serving would start it again."""
    chain = serving_chain(os.environ)
    if Path(os.path.realpath(directory)) in chain:
        path = " -> ".join(map(str, [*chain, directory]))
        raise SystemExit(f"toolbridge: refusing to serve {directory} inside a toolbridge that already serves it "
                         f"({path}; {SERVING}): an upstream in that chain runs toolbridge on this config dir; "
                         "remove that upstream (a client connects to toolbridge, toolbridge is not its own upstream)")


def _serve(args: argparse.Namespace, config: Config) -> None:
    http = None
    if args.transport == "http":
        token = _auth_token(args)
        _refuse_unsafe_http(args, config, token)
        if (args.host not in (*LOOPBACK_HOSTS, "::1") and not token and config.toolsets.auth is None
                and not args.insecure_no_auth):
            raise SystemExit(
                f"toolbridge: refusing to serve {args.host} without a bearer token: anyone who can reach it could "
                "call every tool. Set TOOLBRIDGE_AUTH_TOKEN (or --auth-token), 'auth:' in toolsets.yaml, or pass "
                "--insecure-no-auth."
            )
        if args.replica_id and not re.fullmatch(REPLICA_ID_PATTERN, args.replica_id):
            raise SystemExit(f"toolbridge: --replica-id {args.replica_id!r} must be a lowercase DNS label "
                             "(a-z, 0-9, '-'), e.g. a StatefulSet pod name")
        http = HttpOptions(host=args.host, port=args.port, auth_token=token, allowed_hosts=tuple(args.allowed_host),
                           allowed_origins=tuple(args.allowed_origin), replica_id=args.replica_id or None)
    elif sys.stdin.isatty():  # someone ran it by hand: say why nothing happens (stdout is the protocol's)
        print("toolbridge: serving MCP on stdio; waiting for an MCP client on stdin (a client starts this command "
              "itself: see `toolbridge init` for the entry to paste; Ctrl-C to stop)", file=sys.stderr, flush=True)
    stop_export = export_traces()
    try:
        anyio.run(functools.partial(serve, config, context_tokens=args.context_tokens, profile=args.profile,
                                    http=http, watch=not args.no_watch, redis_url=args.redis_url or None))
    finally:
        stop_export()
    if http is None:
        _exit_past_stdin_reader()


def _exit_past_stdin_reader() -> None:
    """Exit now that the fleet is down, without joining the stdin reader thread.

    The stdio transport reads stdin in a worker thread that it abandons on shutdown: while the
    client keeps stdin open that read never returns, and the interpreter would wait for it on exit.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# --- one-shot commands ----------------------------------------------------------------------


async def _show_progress(gateway: Gateway) -> None:
    """Servers ready / total on stderr while the fleet connects; only on a terminal."""
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("connecting upstreams", total=len(gateway.fleet.status()))
        while True:
            settled = sum(s.state is not UpstreamState.STARTING for s in gateway.fleet.status())
            progress.update(task, completed=settled)
            await anyio.sleep(0.1)


async def _with_fleet(args: argparse.Namespace, config: Config, work: Any) -> Any:
    async with run_gateway(config, context_tokens=args.context_tokens) as gateway, anyio.create_task_group() as tg:
        if sys.stderr.isatty():
            tg.start_soon(_show_progress, gateway)
        await gateway.wait_until_ready(args.wait)
        tg.cancel_scope.cancel()
        return work(gateway)


def _approve(args: argparse.Namespace) -> int:
    """Trust the pending definitions of a server's tools; a running `serve` registers them at once."""
    store = FingerprintStore(fingerprints_path(args.config_dir))
    try:
        approved = store.approve(args.server, args.tools)
    except KeyError as exc:
        print(f"toolbridge: no change awaits approval for {args.server}: {exc.args[0]}", file=sys.stderr)
        return 1
    if not approved:
        print(f"toolbridge: no change awaits approval for {args.server}", file=sys.stderr)
        return 1
    print(f"approved {len(approved)} tool definition(s) of {args.server}: {', '.join(approved)}")
    return 0


def _report(written: Written, imported: Imported | None) -> int:
    for file in written.files:
        print(f"wrote {file}")
    for warning in imported.warnings if imported else ():
        print(f"warning: {warning}", file=sys.stderr)
    problems = [*(imported.problems if imported else ()), *written.problems]
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


def _import(args: argparse.Namespace) -> int:
    """Write one `upstreams/<name>.yaml` per server of a client config; never overwrite silently, and never
    into a directory that is not a config dir unless it was named (`--config-dir`, `TOOLBRIDGE_HOME`)."""
    named = args.given_config_dir is not None or os.environ.get("TOOLBRIDGE_HOME")
    if not args.config_dir.is_dir():
        what = "does not exist"
    elif not (named or _is_config_dir(args.config_dir)):
        what = "is not a config dir (it has neither toolsets.yaml nor upstreams/)"
    else:
        imported = import_client_config(args.file)
        return _report(write_upstreams(args.config_dir, imported.upstreams, args.force), imported)
    print(f"error: {args.config_dir} {what}; pass --config-dir DIR, or `toolbridge init DIR --import {args.file}` "
          "writes a new one", file=sys.stderr)
    return 1


def _init(args: argparse.Namespace) -> int:
    """A working config dir in one command: the example upstream, or the servers of a client config."""
    directory = (args.directory or args.config_dir).absolute()
    imported = import_client_config(args.import_file) if args.import_file else None
    if imported is not None and not imported.upstreams:  # nothing to take: write nothing
        return _report(Written(), imported)
    code = _report(init_config_dir(directory, imported, args.force), imported)
    print(connect_hint(directory))
    return code


def _login(args: argparse.Namespace, config: Config) -> int:
    """The browser flow for one `auth: oauth` upstream: print the URL, take the loopback redirect."""
    upstream = config.upstreams.get(args.server)
    if upstream is None or upstream.auth is None:
        print(f"error: {args.server!r} is not an upstream with 'auth: oauth' in {config.directory}/upstreams/",
              file=sys.stderr)
        return 1

    port = upstream.auth.redirect_port

    async def show(url: str) -> None:
        print(f"Open this URL in a browser to authorize toolbridge for {upstream.name}:\n\n    {url}\n\n"
              f"Waiting for the browser to come back to 127.0.0.1:{port} ...", flush=True)

    try:
        count = anyio.run(functools.partial(login, upstream, config.directory, show_url=show))
    except UpstreamError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    where = token_store(upstream, config.directory).location
    print(f"{upstream.name}: authorized, {count} tools; tokens are kept in {where}")
    return 0


def _check(config: Config) -> int:
    problems = [*config.problems, *check_problems(config)]
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    for warning in config.warnings:
        print(f"warning: toolsets.yaml: {warning}", file=sys.stderr)
    print(f"{len(config.upstreams)} upstream(s) valid, {sum(p.mistakes for p in problems)} problem(s)")
    return 1 if problems else 0


# --- argument parsing -----------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toolbridge", description="One MCP endpoint for many MCP servers.")
    parser.add_argument("--version", action="version", version=f"toolbridge {__version__}")
    base = argparse.ArgumentParser(add_help=False)
    base.add_argument("--config-dir", dest="given_config_dir", type=Path, metavar="DIR",
                      help="the directory holding toolsets.yaml and upstreams/ (default: $TOOLBRIDGE_HOME, else .)")
    base.add_argument("--log-level", default=os.environ.get("TOOLBRIDGE_LOG_LEVEL", "info"),
                      choices=["debug", "info", "warning", "error"], type=str.lower,
                      help="stderr log level (default: $TOOLBRIDGE_LOG_LEVEL, else info)")
    common = argparse.ArgumentParser(add_help=False, parents=[base])
    common.add_argument("--profile", help="profile to use (default: by client name, else 'default')")
    common.add_argument("--context-tokens", type=int, help="client context size for profiles that set none")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", parents=[common], help="serve MCP over stdio (default) or HTTP")
    serve.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                       help="stdio (what client configs launch; the default) or Streamable HTTP")
    serve.add_argument("--host", default="127.0.0.1", help="HTTP address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="HTTP port (default: 8765)")
    serve.add_argument("--auth-token", help="require this bearer token (or set TOOLBRIDGE_AUTH_TOKEN)")
    serve.add_argument("--allowed-host", action="append", default=[], help="extra allowed Host header value")
    serve.add_argument("--allowed-origin", action="append", default=[], help="extra allowed Origin")
    serve.add_argument("--insecure-no-auth", action="store_true", help="allow a non-loopback --host with no token")
    serve.add_argument("--replica-id", default=os.environ.get("TOOLBRIDGE_REPLICA_ID"),
                       help="behind a load balancer: this replica's marker in its session ids "
                            "(or set TOOLBRIDGE_REPLICA_ID)")
    serve.add_argument("--redis-url", default=os.environ.get("TOOLBRIDGE_REDIS_URL"),
                       help="share large results and cached catalogs between replicas in this Redis "
                            "(or set TOOLBRIDGE_REDIS_URL; else toolsets.yaml's redis_url)")
    serve.add_argument("--no-watch", action="store_true",
                       help="do not apply config edits while serving (SIGHUP still does)")

    waiting = argparse.ArgumentParser(add_help=False)
    waiting.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the fleet to connect")
    catalog = commands.add_parser("catalog", parents=[common, waiting], help="print what a client would get")
    catalog.add_argument("--json", action="store_true", help="print the report as JSON")
    search = commands.add_parser("search", parents=[common, waiting], help="search the deferred tools")
    search.add_argument("words", nargs="+", help="the query (its words are joined into one query)")
    search.add_argument("--limit", type=int, help="matches per query (default: tool_search.search_default_limit)")
    status = commands.add_parser("status", parents=[common, waiting],
                                 help="show a running proxy's state (--url), else connect a fresh fleet once")
    status.add_argument("--url", help="base URL of a running `serve --transport http`, e.g. http://127.0.0.1:8765")
    status.add_argument("--auth-token", help="its bearer token (or set TOOLBRIDGE_AUTH_TOKEN)")
    commands.add_parser("check", parents=[base], help="validate the config; non-zero exit on problems")
    init = commands.add_parser("init", parents=[base], help="write a working config dir (an example upstream, "
                               "or the servers of your client's config)")
    init.add_argument("directory", type=Path, nargs="?", help="where (default: --config-dir)")
    init.add_argument("--import", dest="import_file", type=Path, metavar="FILE",
                      help="take the servers of this client config (claude_desktop_config.json, .mcp.json, mcp.json)")
    init.add_argument("--force", action="store_true", help="overwrite existing files")
    importer = commands.add_parser("import", parents=[base], help="convert a client's mcpServers config")
    importer.add_argument("file", type=Path, help="claude_desktop_config.json, .mcp.json, mcp.json or settings.json")
    importer.add_argument("--force", action="store_true", help="overwrite existing upstream files")
    authorize = commands.add_parser("login", parents=[base], help="authorize an 'auth: oauth' upstream (browser)")
    authorize.add_argument("server", help="the upstream's name (its file in upstreams/)")
    approve = commands.add_parser("approve", parents=[base],
                                  help="trust the changed tool definitions of a server (all, or the named tools)")
    approve.add_argument("server", help="the upstream's name (its file in upstreams/)")
    approve.add_argument("tools", nargs="*", help="the tools to trust (default: every changed one)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Before numpy loads (it loads lazily, with search): a semantic query's one matrix product is fastest on one
    # thread (~0.15 ms at 10k tools), and split over threads it waited 5-15 ms on a busy 2-core machine.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        return _run(_parser().parse_args(argv))
    except BrokenPipeError:  # `toolbridge status | head`: the reader left, which is not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit flush must not raise again
        return 0


def _run(args: argparse.Namespace) -> int:
    _setup_logging(args.log_level)
    args.config_dir = _config_dir(args.given_config_dir)
    if args.command == "import":
        return _import(args)
    if args.command == "approve":
        return _approve(args)
    if args.command == "init":
        return _init(args)
    if args.command == "status" and args.url:
        print_status(fetch_status(args.url, _auth_token(args)))
        return 0
    if args.command == "serve":
        _refuse_nesting(args.config_dir)
    config = _load(args)
    if args.command in ("serve", "catalog", "search", "status"):  # they start the fleet: its children learn the chain
        os.environ.update(enter_chain(os.environ, args.config_dir))
    if args.command == "check":
        return _check(config)
    if args.command == "login":
        return _login(args, config)
    if args.command == "serve":
        _serve(args, config)
        return 0
    profile = args.profile or "default"
    if args.command == "catalog":
        report, problems = anyio.run(_with_fleet, args, config, lambda g: (catalog_report(g.views, profile),
                                                                           fleet_problems(g)))
        print_catalog(report, args.json)
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 1 if problems else 0
    elif args.command == "search":
        query = {"queries": [" ".join(args.words)], "limit": args.limit}
        def run_search(g: Gateway) -> dict[str, Any]:
            return bridge.search(g.views, g.views.for_profile(profile), query)

        result = anyio.run(_with_fleet, args, config, run_search)
        print(json.dumps(result, indent=2, ensure_ascii=False))
    elif args.command == "status":
        print_status(anyio.run(_with_fleet, args, config, lambda g: g.status()))
    return 0
