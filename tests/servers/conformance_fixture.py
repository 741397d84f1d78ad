"""The server that the MCP conformance suite's server scenarios expect (`@modelcontextprotocol/conformance` 0.2.x).

Every tool, resource, template, prompt and utility that a scenario calls is here under the exact
name the scenario uses, so a direct run passes the whole active suite. Running the suite through
toolbridge, with this fixture as its only upstream, then shows what the proxy loses.

    python tests/servers/conformance_fixture.py              # stdio
    python tests/servers/conformance_fixture.py --http 3001  # Streamable HTTP at http://127.0.0.1:3001/mcp

Over HTTP it keeps an event store and suggests a retry interval, so a tool can close its SSE stream
mid-call and the client can resume (SEP-1699, scenario `server-sse-polling`).
"""

from __future__ import annotations

import argparse
import json
import re
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
from mcp import MCPError, types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.message import ServerMessageMetadata
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

try:
    from servers import mrtr_tools
    from servers.list_triggers import ListChanges
except ImportError:  # run as a script: tests/servers/ is on sys.path
    import mrtr_tools  # type: ignore[no-redef]
    from list_triggers import ListChanges  # type: ignore[no-redef]

# A 1x1 PNG and a silent WAV: the smallest valid payloads of each kind.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
LOG_LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency",
)
COMPLETIONS = {"arg1": ["paris", "park", "party", "test"], "arg2": ["world", "work"], "id": ["123", "456"]}

_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}
_JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}},
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}
_SEP1034_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"],
                   "default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
}
_SEP1330_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "oneOf": [
            {"const": "value1", "title": "First Option"},
            {"const": "value2", "title": "Second Option"},
            {"const": "value3", "title": "Third Option"},
        ]},
        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                       "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "items": {"anyOf": [
            {"const": "value1", "title": "First Choice"},
            {"const": "value2", "title": "Second Choice"},
            {"const": "value3", "title": "Third Choice"},
        ]}},
    },
}
_USER_SCHEMA = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}

Context = Any  # ServerRequestContext; kept loose so the handlers read as the scenarios describe them
Params = types.CallToolRequestParams
ToolResult = types.CallToolResult | types.InputRequiredResult
ToolFn = Callable[[Context, Params], Awaitable[ToolResult]]
_Answer = TypeVar("_Answer", types.CreateMessageResult, types.ElicitResult)


def _text(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


def _string_argument(name: str, description: str) -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": "string", "description": description}},
            "required": [name]}


async def _ask(ctx: Context, params: Params, request: types.InputRequest, answer: type[_Answer]
               ) -> _Answer | types.InputRequiredResult:
    """Put `request` to the client: on its back-channel (handshake era) or as input required (2026-07-28).

    A 2026-07-28 client has no back-channel; it fulfils the `InputRequiredResult` and calls again,
    carrying the response under the same key.
    """
    if ctx.session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return await ctx.session.send_request(request, answer, metadata=ServerMessageMetadata(
            related_request_id=ctx.request_id))
    response = (params.input_responses or {}).get(request.method)
    if response is None:
        return types.InputRequiredResult(input_requests={request.method: request})
    return answer.model_validate(response.model_dump(by_alias=True), by_name=False)


class Fixture:
    """The fixture's per-process state: log levels per connection, resource subscriptions, the lists the
    triggers change."""

    def __init__(self) -> None:
        self.log_levels: dict[str, types.LoggingLevel] = {}
        self.subscriptions: set[str] = set()
        self.changes = ListChanges()

    @staticmethod
    def connection_key(ctx: Context) -> str:
        """The HTTP session id, or one key for the whole stdio connection."""
        request = ctx.request
        return (request.headers.get("mcp-session-id") or "") if request is not None else "stdio"

    async def log(self, ctx: Context, level: types.LoggingLevel, message: str) -> None:
        """Send `message` on the calling request's stream unless the connection set a higher level."""
        threshold = self.log_levels.get(self.connection_key(ctx), "debug")
        if LOG_LEVELS.index(level) >= LOG_LEVELS.index(threshold):
            await ctx.session.send_log_message(level, message, "conformance-fixture",
                                               related_request_id=ctx.request_id)

    # Tools, in the order the scenarios list them.

    async def simple_text(self, ctx: Context, params: Params) -> ToolResult:
        return _text("This is a simple text response for testing.")

    async def image_content(self, ctx: Context, params: Params) -> ToolResult:
        return types.CallToolResult(content=[types.ImageContent(type="image", data=PNG, mime_type="image/png")])

    async def audio_content(self, ctx: Context, params: Params) -> ToolResult:
        return types.CallToolResult(content=[types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")])

    async def embedded_resource(self, ctx: Context, params: Params) -> ToolResult:
        resource = types.TextResourceContents(uri="test://embedded-resource", mime_type="text/plain",
                                              text="This is an embedded resource content.")
        return types.CallToolResult(content=[types.EmbeddedResource(type="resource", resource=resource)])

    async def multiple_content_types(self, ctx: Context, params: Params) -> ToolResult:
        resource = types.TextResourceContents(uri="test://mixed-content-resource", mime_type="application/json",
                                              text=json.dumps({"test": "data", "value": 123}))
        return types.CallToolResult(content=[
            types.TextContent(type="text", text="Multiple content types test:"),
            types.ImageContent(type="image", data=PNG, mime_type="image/png"),
            types.EmbeddedResource(type="resource", resource=resource),
        ])

    async def with_logging(self, ctx: Context, params: Params) -> ToolResult:
        await self.log(ctx, "info", "Tool execution started")
        await anyio.sleep(0.05)
        await self.log(ctx, "info", "Tool processing data")
        await anyio.sleep(0.05)
        await self.log(ctx, "info", "Tool execution completed")
        return _text("Tool with logging executed successfully")

    async def error_handling(self, ctx: Context, params: Params) -> ToolResult:
        return _text("This tool intentionally returns an error for testing", is_error=True)

    async def with_progress(self, ctx: Context, params: Params) -> ToolResult:
        for step in (0, 50, 100):
            await ctx.session.report_progress(step, 100, f"Completed step {step} of 100")
            if step < 100:
                await anyio.sleep(0.05)
        return _text("Tool with progress executed successfully")

    async def sampling(self, ctx: Context, params: Params) -> ToolResult:
        if not ctx.session.check_client_capability(types.ClientCapabilities(sampling=types.SamplingCapability())):
            return _text("The client does not support sampling.", is_error=True)
        prompt = types.TextContent(type="text", text=(params.arguments or {})["prompt"])
        request = types.CreateMessageRequest(params=types.CreateMessageRequestParams(
            messages=[types.SamplingMessage(role="user", content=prompt)], max_tokens=100))
        result = await _ask(ctx, params, request, types.CreateMessageResult)
        if isinstance(result, types.InputRequiredResult):
            return result
        reply = result.content.text if isinstance(result.content, types.TextContent) else "(no text)"
        return _text(f"LLM response: {reply}")

    async def _elicit(self, ctx: Context, params: Params, message: str, schema: dict[str, Any], label: str
                      ) -> ToolResult:
        if not ctx.session.check_client_capability(
                types.ClientCapabilities(elicitation=types.ElicitationCapability())):
            return _text("The client does not support elicitation.", is_error=True)
        request = types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))
        result = await _ask(ctx, params, request, types.ElicitResult)
        if isinstance(result, types.InputRequiredResult):
            return result
        return _text(f"{label}: action={result.action}, content={json.dumps(result.content or {})}")

    async def elicitation(self, ctx: Context, params: Params) -> ToolResult:
        message = (params.arguments or {})["message"]
        return await self._elicit(ctx, params, message, _USER_SCHEMA, "User response")

    async def elicitation_sep1034_defaults(self, ctx: Context, params: Params) -> ToolResult:
        return await self._elicit(ctx, params, "Please provide user information", _SEP1034_SCHEMA,
                                  "Elicitation completed")

    async def elicitation_sep1330_enums(self, ctx: Context, params: Params) -> ToolResult:
        return await self._elicit(ctx, params, "Please select values using each kind of enum", _SEP1330_SCHEMA,
                                  "Elicitation completed")

    async def json_schema_2020_12(self, ctx: Context, params: Params) -> ToolResult:
        return _text(f"Received: {json.dumps(params.arguments or {}, sort_keys=True)}")

    async def reconnection(self, ctx: Context, params: Params) -> ToolResult:
        """Close this call's SSE stream mid-call when the transport can resume it (SEP-1699)."""
        await self.log(ctx, "info", "Before disconnect")
        if ctx.close_sse_stream is not None:
            await ctx.close_sse_stream()
            await anyio.sleep(0.2)  # the client reconnects with Last-Event-ID meanwhile
        await self.log(ctx, "info", "After reconnect")
        return _text("Reconnection test completed")


def _tools(fixture: Fixture) -> dict[str, tuple[types.Tool, ToolFn]]:
    table: list[tuple[str, str, dict[str, Any], ToolFn]] = [
        ("test_simple_text", "Returns simple text content.", _NO_ARGUMENTS, fixture.simple_text),
        ("test_image_content", "Returns a PNG image.", _NO_ARGUMENTS, fixture.image_content),
        ("test_audio_content", "Returns a WAV audio clip.", _NO_ARGUMENTS, fixture.audio_content),
        ("test_embedded_resource", "Returns an embedded text resource.", _NO_ARGUMENTS, fixture.embedded_resource),
        ("test_multiple_content_types", "Returns text, an image and an embedded resource.", _NO_ARGUMENTS,
         fixture.multiple_content_types),
        ("test_tool_with_logging", "Sends three info log messages while it runs.", _NO_ARGUMENTS,
         fixture.with_logging),
        ("test_error_handling", "Always returns an error result.", _NO_ARGUMENTS, fixture.error_handling),
        ("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100.", _NO_ARGUMENTS, fixture.with_progress),
        ("test_sampling", "Asks the client's LLM to answer the prompt.",
         _string_argument("prompt", "The prompt to send to the LLM"), fixture.sampling),
        ("test_elicitation", "Asks the user for a username and an email address.",
         _string_argument("message", "The message to show the user"), fixture.elicitation),
        ("test_elicitation_sep1034_defaults", "Elicits one field of each primitive type, each with a default.",
         _NO_ARGUMENTS, fixture.elicitation_sep1034_defaults),
        ("test_elicitation_sep1330_enums", "Elicits the five kinds of enum field.", _NO_ARGUMENTS,
         fixture.elicitation_sep1330_enums),
        ("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", _JSON_SCHEMA_2020_12,
         fixture.json_schema_2020_12),
        ("test_reconnection", "Closes its SSE stream mid-call, then answers after the client resumes.",
         _NO_ARGUMENTS, fixture.reconnection),
    ]
    return {**{name: (types.Tool(name=name, description=description, input_schema=schema), fn)
               for name, description, schema, fn in table}, **mrtr_tools.tools()}


# Resources and prompts.

STATIC_RESOURCES = {
    "test://static-text": (
        types.Resource(uri="test://static-text", name="static-text", mime_type="text/plain",
                       description="A static text resource."),
        types.TextResourceContents(uri="test://static-text", mime_type="text/plain",
                                   text="This is the content of the static text resource."),
    ),
    "test://static-binary": (
        types.Resource(uri="test://static-binary", name="static-binary", mime_type="image/png",
                       description="A static binary resource (a PNG image)."),
        types.BlobResourceContents(uri="test://static-binary", mime_type="image/png", blob=PNG),
    ),
    "test://watched-resource": (
        types.Resource(uri="test://watched-resource", name="watched-resource", mime_type="text/plain",
                       description="A resource that clients can subscribe to."),
        types.TextResourceContents(uri="test://watched-resource", mime_type="text/plain",
                                   text="Watched resource content"),
    ),
}
TEMPLATE = types.ResourceTemplate(uri_template="test://template/{id}/data", name="template-data",
                                  mime_type="application/json",
                                  description="Data for one id, substituted into the URI.")
_TEMPLATE_URI = re.compile(r"test://template/(?P<id>[^/]+)/data")

PROMPTS = {
    p.name: p for p in (
        types.Prompt(name="test_simple_prompt", description="A simple prompt without arguments."),
        types.Prompt(name="test_prompt_with_arguments", description="A prompt with two required arguments.",
                     arguments=[types.PromptArgument(name="arg1", description="First test argument", required=True),
                                types.PromptArgument(name="arg2", description="Second test argument", required=True)]),
        types.Prompt(name="test_prompt_with_embedded_resource", description="A prompt that embeds a resource.",
                     arguments=[types.PromptArgument(name="resourceUri", description="URI of the resource to embed",
                                                     required=True)]),
        types.Prompt(name="test_prompt_with_image", description="A prompt that includes an image."),
        mrtr_tools.PROMPT,
    )
}


def _user(content: Any) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


def _prompt_messages(name: str, arguments: dict[str, str]) -> list[types.PromptMessage]:
    if name == "test_simple_prompt":
        return [_user(types.TextContent(type="text", text="This is a simple prompt for testing."))]
    if name == "test_prompt_with_arguments":
        text = f"Prompt with arguments: arg1='{arguments['arg1']}', arg2='{arguments['arg2']}'"
        return [_user(types.TextContent(type="text", text=text))]
    if name == "test_prompt_with_embedded_resource":
        resource = types.TextResourceContents(uri=arguments["resourceUri"], mime_type="text/plain",
                                              text="Embedded resource content for testing.")
        return [_user(types.EmbeddedResource(type="resource", resource=resource)),
                _user(types.TextContent(type="text", text="Please process the embedded resource above."))]
    return [_user(types.ImageContent(type="image", data=PNG, mime_type="image/png")),
            _user(types.TextContent(type="text", text="Please analyze the image above."))]


def read_resource(uri: str) -> types.ReadResourceResult:
    """Raises: MCPError (invalid params) for a URI that is neither static nor the template's."""
    if uri in STATIC_RESOURCES:
        return types.ReadResourceResult(contents=[STATIC_RESOURCES[uri][1]])
    if match := _TEMPLATE_URI.fullmatch(uri):
        ident = match["id"]
        text = json.dumps({"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"})
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=text)])
    raise MCPError(types.INVALID_PARAMS, f"Resource not found: {uri}", {"uri": uri})


def get_prompt(name: str, arguments: dict[str, str]) -> types.GetPromptResult:
    """Raises: MCPError (invalid params) for an unknown prompt or a missing required argument."""
    prompt = PROMPTS.get(name)
    if prompt is None:
        raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {name}")
    missing = [a.name for a in prompt.arguments or () if a.required and a.name not in arguments]
    if missing:
        raise MCPError(types.INVALID_PARAMS, f"Missing required arguments: {', '.join(missing)}")
    return types.GetPromptResult(description=prompt.description, messages=_prompt_messages(name, arguments))


class _Announcing(Server):
    """Advertises the legacy listChanged flags on every transport (HTTP apps pass no options)."""

    def create_initialization_options(self, notification_options=None, *args: Any, **kwargs: Any):  # type: ignore[override]
        options = notification_options or NotificationOptions(
            tools_changed=True, prompts_changed=True, resources_changed=True)
        return super().create_initialization_options(options, *args, **kwargs)


def build_server(fixture: Fixture | None = None) -> Server:
    fixture = fixture or Fixture()
    tools = _tools(fixture)

    changes = fixture.changes

    async def list_tools(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        changes.reader(fixture.connection_key(ctx), ctx)
        return types.ListToolsResult(tools=[tool for tool, _ in {**tools, **changes.tools()}.values()])

    async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
        listed = {**tools, **changes.tools()}
        if params.name not in listed:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        return await listed[params.name][1](ctx, params)

    async def list_resources(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[*(resource for resource, _ in STATIC_RESOURCES.values()),
                                                    mrtr_tools.RESOURCE])

    async def list_templates(ctx: Context, params: types.PaginatedRequestParams | None
                             ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[TEMPLATE])

    async def on_read(ctx: Context, params: types.ReadResourceRequestParams
                      ) -> types.ReadResourceResult | types.InputRequiredResult:
        if params.uri == mrtr_tools.RESOURCE.uri:
            return mrtr_tools.read_resource(params)
        return read_resource(params.uri)

    async def subscribe(ctx: Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
        fixture.subscriptions.add(params.uri)
        return types.EmptyResult()

    async def unsubscribe(ctx: Context, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        fixture.subscriptions.discard(params.uri)
        return types.EmptyResult()

    async def list_prompts(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        changes.reader(fixture.connection_key(ctx), ctx)
        return types.ListPromptsResult(prompts=[*PROMPTS.values(), *changes.prompts()])

    async def on_get_prompt(ctx: Context, params: types.GetPromptRequestParams
                            ) -> types.GetPromptResult | types.InputRequiredResult:
        if params.name == mrtr_tools.PROMPT.name:
            return mrtr_tools.get_prompt(params)
        if params.name in {prompt.name for prompt in changes.prompts()}:
            return changes.added_prompt()
        return get_prompt(params.name, params.arguments or {})

    async def complete(ctx: Context, params: types.CompleteRequestParams) -> types.CompleteResult:
        argument = params.argument
        values = [v for v in COMPLETIONS.get(argument.name, []) if v.startswith(argument.value)]
        return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))

    async def set_level(ctx: Context, params: types.SetLevelRequestParams) -> types.EmptyResult:
        fixture.log_levels[fixture.connection_key(ctx)] = params.level
        return types.EmptyResult()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)  # logging/setLevel is a handshake-era feature
        return _Announcing(
            "conformance-fixture", version="1.0.0",
            on_list_tools=list_tools, on_call_tool=call_tool,
            on_list_resources=list_resources, on_list_resource_templates=list_templates,
            on_read_resource=on_read, on_subscribe_resource=subscribe, on_unsubscribe_resource=unsubscribe,
            on_list_prompts=list_prompts, on_get_prompt=on_get_prompt,
            on_completion=complete, on_set_logging_level=set_level,
            on_subscriptions_listen=ListenHandler(changes.bus),
        )


class MemoryEventStore(EventStore):
    """Every event of the process, in order, so a client can resume any stream (fixture-sized)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, types.JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        self.events.append((stream_id, message))
        return str(len(self.events))

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        if not last_event_id.isdigit() or not 0 < int(last_event_id) <= len(self.events):
            return None
        stream_id = self.events[int(last_event_id) - 1][0]
        for index in range(int(last_event_id), len(self.events)):
            stream, message = self.events[index]
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, str(index + 1)))
        return stream_id


def http_app(fixture: Fixture | None = None) -> Any:
    """The Streamable HTTP app at `/mcp`, resumable, with DNS-rebinding protection for 127.0.0.1."""
    return build_server(fixture).streamable_http_app(event_store=MemoryEventStore(), retry_interval=100)


async def _serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = build_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT")
    options = parser.parse_args()
    warnings.simplefilter("ignore", MCPDeprecationWarning)  # send_log_message and create_message are legacy-era
    if options.http is None:
        anyio.run(_serve_stdio)
        return
    import uvicorn

    uvicorn.run(http_app(), host="127.0.0.1", port=options.http, log_level="warning")


if __name__ == "__main__":
    main()
