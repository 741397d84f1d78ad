"""`prompts/*` and `completion/complete` for one session.

Prompt names are exposed like tool names (`<server>__<prompt>`, raw under `prefix: false`) and
routed back to the owner under its own name; a completion goes where its ref points: the prompt's
server, or the server owning the resource template.
"""

from __future__ import annotations

from mcp import MCPError, types

from proxy.downstream.lists._advertising import list_hint
from proxy.downstream.lists._resources import ViewOf, route
from proxy.downstream.rounds import WayBack
from proxy.downstream.session import RequestContext, Upstreams, page, protocol_error, upstream_span
from proxy.errors import ToolbridgeError
from proxy.protocol import BackChannel, caller_meta
from proxy.views import SessionView


def _prompt(view: SessionView, name: str) -> tuple[str, str]:
    """Raises: MCPError when the session has no prompt of that name."""
    route = view.catalog.prompt_routes.get(name)
    if route is None:
        raise MCPError(types.INVALID_PARAMS, f"toolbridge: no prompt named {name!r} in this session")
    return route


class Prompts:
    """The `prompts/*` and `completion/complete` handlers."""

    def __init__(self, upstreams: Upstreams, view_of: ViewOf, way_back: WayBack) -> None:
        self.upstreams = upstreams
        self.view_of = view_of
        self.way_back = way_back

    async def list(self, ctx: RequestContext, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        view = await self.view_of(ctx)
        items, cursor = page(view.catalog.prompts, params.cursor if params else None)
        return types.ListPromptsResult(prompts=items, next_cursor=cursor, **list_hint(ctx, view, "prompts"))

    async def get(self, ctx: RequestContext, params: types.GetPromptRequestParams
                  ) -> types.GetPromptResult | types.InputRequiredResult:
        """The upstream's prompt, its resource links under URIs that read back from that server; a 2026-era
        caller may be asked for input first (`WayBack`)."""
        view = await self.view_of(ctx)
        server, raw = _prompt(view, params.name)
        arguments = params.arguments

        async def get(channel: BackChannel) -> types.GetPromptResult:
            try:
                with upstream_span(server, "prompts/get", raw, {"gen_ai.prompt.name": raw}):
                    return await self.upstreams.request(
                        server, f"prompt {raw!r}",
                        lambda c: c.get_prompt(raw, arguments, meta=caller_meta(channel.capabilities)), channel)
            except ToolbridgeError as exc:
                raise protocol_error(exc) from exc

        result = await self.way_back.run(ctx, view.profile, params, get)
        if isinstance(result, types.InputRequiredResult):
            return result
        result.messages = [message.model_copy(update={"content": view.catalog.addressed(server, message.content)})
                           for message in result.messages]
        return result

    async def complete(self, ctx: RequestContext, params: types.CompleteRequestParams) -> types.CompleteResult:
        view = await self.view_of(ctx)
        ref: types.PromptReference | types.ResourceTemplateReference
        if isinstance(params.ref, types.PromptReference):
            server, raw = _prompt(view, params.ref.name)
            ref = params.ref.model_copy(update={"name": raw})
        else:
            server, uri = route(view, params.ref.uri, template=True)
            ref = params.ref.model_copy(update={"uri": uri})
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = params.context.arguments if params.context is not None else None
        try:
            return await self.upstreams.request(server, "completion", lambda c: c.complete(ref, argument, context))
        except ToolbridgeError as exc:
            raise protocol_error(exc) from exc
