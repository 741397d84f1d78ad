"""Tool calls: what a `tools/call` reaches (a bridge tool, a direct tool, an MCP App's call back), and its answer.

Every failure becomes an error result the model reads, in one place (`_answer`), except an upstream's
refusal for a capability the caller did not declare: that is the caller's to hear, as -32021. The operator gets
a `CallRecord` of each answered call. A handshake-era session's call uses its own stream as the back
channel; a 2026-era one's runs across input-required rounds when it must (`rounds/_input_rounds`), and one
that declared the tasks extension gets the task an upstream made of it (`_tasks`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from mcp import MCPError, types

from proxy.downstream.calls import _bridge as bridge
from proxy.downstream.calls._arguments import check_call
from proxy.downstream.calls._large import LargeResults, result_owner
from proxy.downstream.calls._tasks import Tasks
from proxy.downstream.lists import Promoter, ViewOf
from proxy.downstream.rounds import RoundTripChannel, RoundTrips, SessionChannel, SessionLogs
from proxy.downstream.session import (
    BRIDGE_SERVER,
    CallObserver,
    CallRecord,
    RequestContext,
    Upstreams,
    caller,
    handshake_era,
    in_profile,
    promotion_key,
    protocol_error,
    record_tool_result,
    scrub_error_result,
    session_label,
    tool_attributes,
    upstream_span,
)
from proxy.errors import (
    DeferredTool,
    InvalidArguments,
    MissingCapability,
    ToolbridgeError,
    UnknownTool,
    UpstreamError,
    redact,
)
from proxy.protocol import HandedOver, rewrite_ui_result
from proxy.registry import ToolEntry
from proxy.replicated import Limits
from proxy.views import SessionView, Views

logger = logging.getLogger(__name__)

SHOWN_NAME = 256  # characters of a requested name that reached no tool kept in the record (the audit log's line)
Channel = SessionChannel | RoundTripChannel


class ToolCalls:
    """How a `tools/call` is answered, from the session's view of the catalog."""

    def __init__(
        self,
        views: Views,
        upstreams: Upstreams,
        view_of: ViewOf,
        await_startup: Callable[[], Awaitable[None]],
        promoter: Promoter,
        logs: SessionLogs,
        round_trips: RoundTrips,
        tasks: Tasks,
        *,
        large_results: LargeResults | None = None,
        on_call: CallObserver | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.views = views
        self.upstreams = upstreams
        self.view_of = view_of
        self.await_startup = await_startup
        self.promoter = promoter
        self.logs = logs
        self.round_trips = round_trips
        self.tasks = tasks
        self.large_results = large_results
        self.on_call = on_call
        self.limits = limits or Limits({})

    async def call_tool(
        self, ctx: RequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        """Answer a call; a 2026-era session's call runs across input-required rounds when it must, and
        one that declared the tasks extension gets the task an upstream made of it (`_tasks`)."""
        if handshake_era(ctx):
            key = caller(ctx).session
            return _handshake_shaped(await self._answer(ctx, params, SessionChannel(ctx, lambda: self.logs.level(key))))

        async def run(channel: RoundTripChannel) -> types.CallToolResult:
            return await self._answer(ctx, params, channel)

        profile = (await self.view_of(ctx)).profile
        result = await self.round_trips.call(ctx, in_profile(caller(ctx).principal, profile), params, run)
        return self.tasks.handle(ctx, profile, result) if isinstance(result, HandedOver) else result

    async def _answer(self, ctx: RequestContext, params: types.CallToolRequestParams, channel: Channel
                      ) -> types.CallToolResult:
        view = await self.view_of(ctx)
        arguments = params.arguments or {}
        if not _offers(view, params.name, arguments):  # only the startup window waits
            await self.await_startup()
            view = await self.view_of(ctx)
        started, clock = time.time(), time.perf_counter()
        target: list[ToolEntry] = []  # the upstream tool this call reached, once known
        error: Exception | None = None
        session = promotion_key(ctx)
        refused: MCPError | None = None
        try:
            result = await self._dispatch(session, view, params.name, arguments, channel, target, handshake_era(ctx),
                                          caller(ctx).principal)
        except MissingCapability as exc:  # the caller's own lack: it is told as the upstream said it (-32021)
            error, refused = exc, protocol_error(exc)
            result = _text_result(str(exc), is_error=True)
        except InvalidArguments as exc:
            error = exc
            payload = {"error": str(exc), "path": exc.path, "constraint": exc.constraint}
            result = _text_result({**payload, "inputSchema": exc.input_schema}, is_error=True)
        except ToolbridgeError as exc:
            error = exc
            result = _text_result(str(exc), is_error=True)
        except Exception as exc:  # session boundary: one bad call never takes the session down
            error = exc
            logger.exception("tool call %s failed", params.name)
            result = _text_result(f"toolbridge: internal error: {redact(str(exc))}", is_error=True)
        if error is None and target and self.large_results is not None:
            result = await self.large_results.cut(result, result_owner(caller(ctx).principal, view.profile))
        if error is None and not result.is_error and handshake_era(ctx):  # 2026 era: only pins promote (SEP-2567)
            await self.promoter.use(session, view, [entry.name for entry in target])
        if self.on_call is not None:
            self.on_call(_record(ctx, view, params.name, arguments, target, result, error,
                                 started, time.perf_counter() - clock))
        if refused is not None:
            raise refused
        return result

    async def _dispatch(
        self, session: Hashable | None, view: SessionView, name: str, arguments: dict[str, Any],
        channel: Channel, target: list[ToolEntry], legacy: bool, principal: str,
    ) -> types.CallToolResult:
        """Bridge tools answer in every tier: a client may hold a list from before a change."""
        if name == "tool_search":
            await bridge.prepare_search(self.views, view, arguments)
            return _text_result(bridge.search(self.views, view, arguments))
        if name == "tool_describe":
            described, pin = bridge.describe(self.views, view, arguments), bridge.pin_request(arguments)
            if pin is not None or legacy:
                await self.promoter.use(session, view, described["tools"], keep=pin is not False)
            if pin is not None:
                described["pinned"] = list(self.promoter.promoted(session, view)) if view.promote else []
            return _text_result(described)
        if name == "tool_call":
            prepared = await bridge.prepare_call(self.views, view, arguments)
            target.append(prepared.entry)
            return await self._forward(view, prepared.entry, prepared.arguments, channel, principal)
        if view.surface.tier != "bridge":
            direct = name in view.scope
        elif not (direct := name in view.core or name in self.promoter.promoted(session, view)):
            await self.promoter.load(session, view)  # another replica may have promoted it
            direct = name in self.promoter.promoted(session, view)
        if not direct and len(callees := view.app_calls.get(name, ())) == 1:  # an MCP App calling its server back
            name, direct = callees[0], True
        entry = self.views.registry.get(name)
        if entry is not None and not direct and view.surface.tier == "bridge" and name in view.allowed:
            raise DeferredTool(name)
        if entry is None or not direct:
            raise UnknownTool(name, list(view.app_calls.get(name, ())) or bridge.suggest(view, name),
                              searchable=view.surface.tier == "bridge")
        target.append(entry)
        return await self._forward(view, entry, await check_call(arguments, entry), channel, principal)

    async def _forward(self, view: SessionView, entry: ToolEntry, arguments: dict[str, Any], channel: Channel,
                       principal: str) -> types.CallToolResult:
        """The upstream's result, its resource links under URIs that read back from that server in this session.

        Every way to an upstream tool passes here, so `limits:` are applied here: a refused call asks nothing.
        """
        async with self.limits.hold(principal=principal, profile=view.profile, server=entry.server, tool=entry.name):
            with upstream_span(entry.server, "tools/call", entry.raw_name, tool_attributes(entry.raw_name)) as span:
                result = record_tool_result(span, await self.upstreams.call_tool(
                    entry.server, entry.raw_name, arguments, progress_callback=channel.progress, channel=channel))
        result = rewrite_ui_result(scrub_error_result(result), entry.server)
        result.content = [view.catalog.addressed(entry.server, block) for block in result.content]
        return result


def _offers(view: SessionView, name: str, arguments: dict[str, Any]) -> bool:
    """Whether the call can be answered from what is registered now (else the startup window may wait).

    A search or describe is about the whole catalog, and a `tool_call` about its target.
    """
    if name in ("tool_search", "tool_describe"):
        return False
    if name == "tool_call":
        target = arguments.get("name")  # anything a client sent: a list or a dict is not hashable
        return isinstance(target, str) and target in view.scope
    return name in view.scope or any(tool.name == name for tool in view.surface.tools)


def _handshake_shaped(result: types.CallToolResult) -> types.CallToolResult:
    """A 2026-era upstream may send any JSON value as `structuredContent`; the handshake-era schema takes only an
    object, so there the value travels as the text the spec asks for beside it (added when it is missing)."""
    value = result.structured_content
    if value is None or isinstance(value, dict):
        return result
    content = result.content or [types.TextContent(type="text", text=json.dumps(value, ensure_ascii=False))]
    return result.model_copy(update={"structured_content": None, "content": content})


def _text_result(payload: Any, *, is_error: bool = False) -> types.CallToolResult:
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


def _record(
    ctx: RequestContext, view: SessionView, name: str, arguments: dict[str, Any], target: list[ToolEntry],
    result: types.CallToolResult, error: Exception | None, started: float, duration: float,
) -> CallRecord:
    """The operator's record of one answered call (metrics, the audit log)."""
    entry = target[0] if target else None
    bridged = name == "tool_call"
    requested = arguments.get("name") if bridged else name
    client = ctx.session.client_params.client_info if ctx.session.client_params is not None else None
    if error is None:
        outcome = "tool_error" if result.is_error else "ok"
    else:
        refused = isinstance(error, ToolbridgeError) and not isinstance(error, UpstreamError)
        outcome = "refused" if refused else "failed"
    who = caller(ctx)
    return CallRecord(
        started=started, duration=duration, session=session_label(who.session), principal=who.principal,
        profile=view.profile,
        client=client.name if client else None, client_version=client.version if client else None,
        tool=entry.name if entry else str(requested)[:SHOWN_NAME], server=entry.server if entry else BRIDGE_SERVER,
        via=name if bridged else None, outcome=outcome, error=type(error).__name__ if error else None,
        arguments=arguments.get("arguments") or {} if bridged else arguments,
    )
