"""The conformance suite's server scenarios written the way most Python servers are: with `MCPServer`.

A second upstream shape next to `conformance_fixture.py` (the lowlevel `Server`, which answers a
2026-07-28 client with input-required rounds). Here tools ask for sampling and elicitation through
the session's helpers, as requests to the client while the tool runs, on the request's stream; the
relay tests' tools send theirs related to no request at all (the connection's standalone channel).
`MCPServer` accepts a 2026-07-28 client too, but such a connection has no channel for those
requests and the tools fail: this is what a proxy meets from servers written before input-required
rounds, which work only for a client that speaks the handshake era to them.

    python tests/servers/mcpserver_fixture.py              # stdio
    python tests/servers/mcpserver_fixture.py --http 3002  # Streamable HTTP at http://127.0.0.1:3002/mcp
    python tests/servers/mcpserver_fixture.py --in-band    # tools report a failed request in their result

With `--in-band` the tools catch a failed sampling or elicitation request and say so in their result,
as many servers do, so the failure never reaches the caller as an error: a third shape of upstream.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import anyio
from mcp import MCPError, types
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.message import ServerMessageMetadata

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conformance_fixture import (
    _SEP1034_SCHEMA,
    _SEP1330_SCHEMA,
    _USER_SCHEMA,
    COMPLETIONS,
    PNG,
    WAV,
    MemoryEventStore,
)

mcp: MCPServer = MCPServer("mcpserver-fixture", version="1.0.0")
IN_BAND = {"on": False}  # set by --in-band


def _text(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


@mcp.tool(name="test_simple_text")
def simple_text() -> str:
    """Returns simple text content."""
    return "This is a simple text response for testing."


@mcp.tool(name="test_image_content")
def image_content() -> types.CallToolResult:
    """Returns a PNG image."""
    return types.CallToolResult(content=[types.ImageContent(type="image", data=PNG, mime_type="image/png")])


@mcp.tool(name="test_audio_content")
def audio_content() -> types.CallToolResult:
    """Returns a WAV audio clip."""
    return types.CallToolResult(content=[types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")])


@mcp.tool(name="test_embedded_resource")
def embedded_resource() -> types.CallToolResult:
    """Returns an embedded text resource."""
    resource = types.TextResourceContents(uri="test://embedded-resource", mime_type="text/plain",
                                          text="This is an embedded resource content.")
    return types.CallToolResult(content=[types.EmbeddedResource(type="resource", resource=resource)])


@mcp.tool(name="test_multiple_content_types")
def multiple_content_types() -> types.CallToolResult:
    """Returns text, an image and an embedded resource."""
    resource = types.TextResourceContents(uri="test://mixed-content-resource", mime_type="application/json",
                                          text=json.dumps({"test": "data", "value": 123}))
    return types.CallToolResult(content=[
        types.TextContent(type="text", text="Multiple content types test:"),
        types.ImageContent(type="image", data=PNG, mime_type="image/png"),
        types.EmbeddedResource(type="resource", resource=resource),
    ])


@mcp.tool(name="test_tool_with_logging")
async def with_logging(ctx: Context) -> str:
    """Sends three info log messages while it runs."""
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(message)
        await anyio.sleep(0.05)
    return "Tool with logging executed successfully"


@mcp.tool(name="test_error_handling")
def error_handling() -> types.CallToolResult:
    """Always returns an error result."""
    return _text("This tool intentionally returns an error for testing", is_error=True)


@mcp.tool(name="test_tool_with_progress")
async def with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100."""
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
        await anyio.sleep(0.05)
    return "Tool with progress executed successfully"


@mcp.tool(name="test_sampling")
async def sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's LLM to answer the prompt."""
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))
    try:
        result = await ctx.session.create_message(messages=[message], max_tokens=100,
                                                  related_request_id=ctx.request_id)
    except MCPError as error:
        if not IN_BAND["on"]:
            raise
        return f"Sampling failed: {error.message}"
    reply = result.content.text if isinstance(result.content, types.TextContent) else "(no text)"
    return f"LLM response: {reply}"


async def _elicit(ctx: Context, message: str, schema: dict[str, Any], label: str) -> str:
    try:
        result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    except MCPError as error:
        if not IN_BAND["on"]:
            raise
        return f"Elicitation failed: {error.message}"
    return f"{label}: action={result.action}, content={json.dumps(result.content or {})}"


@mcp.tool(name="test_elicitation")
async def elicitation(message: str, ctx: Context) -> str:
    """Asks the user for a username and an email address (on the request's stream)."""
    return await _elicit(ctx, message, _USER_SCHEMA, "User response")


@mcp.tool(name="test_elicitation_sep1034_defaults")
async def elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicits one field of each primitive type, each with a default."""
    return await _elicit(ctx, "Please provide user information", _SEP1034_SCHEMA, "Elicitation completed")


@mcp.tool(name="test_elicitation_sep1330_enums")
async def elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicits the five kinds of enum field."""
    return await _elicit(ctx, "Please select values using each kind of enum", _SEP1330_SCHEMA,
                         "Elicitation completed")


@mcp.tool(name="json_schema_2020_12_tool", description="Tool with JSON Schema 2020-12 features")
def json_schema_2020_12(name: str | None = None, address: dict[str, Any] | None = None) -> str:
    given = {key: value for key, value in (("name", name), ("address", address)) if value is not None}
    return f"Received: {json.dumps(given, sort_keys=True)}"


@mcp.tool(name="test_reconnection")
async def reconnection(ctx: Context) -> str:
    """Closes its SSE stream mid-call, then answers after the client resumes."""
    await ctx.info("Before disconnect")
    await ctx.close_sse_stream()
    await anyio.sleep(0.2)
    await ctx.info("After reconnect")
    return "Reconnection test completed"


# For the relay tests: which client answers a sampling request, and a request that comes too late.

async def _sample_text(ctx: Context, text: str) -> str:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))
    result = await ctx.session.create_message(messages=[message], max_tokens=10)
    return result.content.text if isinstance(result.content, types.TextContent) else "(no text)"


@mcp.tool(name="whoami_sampling")
async def whoami_sampling(tag: str, ctx: Context, delay: float = 0.02) -> str:
    """Samples with `tag` as the prompt after `delay` seconds (concurrent callers overlap) and returns the answer."""
    await anyio.sleep(delay)
    return await _sample_text(ctx, tag)


@mcp.tool(name="whoami_logging")
async def whoami_logging(tag: str, ctx: Context, delay: float = 0.05) -> str:
    """Logs `tag` twice, `delay` seconds apart (concurrent callers overlap), with nothing tying it to the call."""
    for step in ("started", "done"):
        await ctx.info(f"{tag} {step}")
        await anyio.sleep(delay)
    return tag


@mcp.tool(name="late_sampling")
async def late_sampling(tag: str, ctx: Context, delay: float = 0.5) -> str:
    """Samples after `delay` seconds even when the call was cancelled meanwhile (a server that ignores it)."""
    with anyio.CancelScope(shield=True):
        await anyio.sleep(delay)
        with anyio.move_on_after(5):
            return await _sample_text(ctx, tag)
    return "(no answer)"


@mcp.tool(name="impatient_sampling")
async def impatient_sampling(ctx: Context, waits: list[float]) -> str:
    """Asks for sampling once per entry of `waits`, giving up on each after that many seconds (its own timeout)."""
    for attempt, wait in enumerate(waits):
        message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=f"try-{attempt}"))
        request = types.CreateMessageRequest(params=types.CreateMessageRequestParams(messages=[message], max_tokens=10))
        try:
            await ctx.session.send_request(request, types.CreateMessageResult, request_read_timeout_seconds=wait,
                                           metadata=ServerMessageMetadata(related_request_id=ctx.request_id))
        except MCPError:
            continue
        return f"answered try-{attempt}"
    return "nobody answered"


@mcp.tool(name="ask_url")
async def ask_url(ctx: Context) -> str:
    """Elicits a visit to a URL (URL mode, `ctx.elicit_url`) and returns what the user did."""
    result = await ctx.elicit_url("Sign in", "https://example.com/login", "e-1")
    return result.action


@mcp.tool(name="list_roots")
async def list_roots(ctx: Context) -> str:
    """Asks the client for its roots (related to no request) and returns their URIs."""
    result = await ctx.session.list_roots()
    return ",".join(str(root.uri) for root in result.roots)


@mcp.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> bytes:
    return base64.b64decode(PNG)


@mcp.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
def watched() -> str:
    return "Watched resource content"


@mcp.resource("test://template/{id}/data", name="template-data", mime_type="application/json")
def template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@mcp.prompt(name="test_simple_prompt")
def simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@mcp.prompt(name="test_prompt_with_arguments")
def prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@mcp.prompt(name="test_prompt_with_embedded_resource")
def prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    """A prompt that embeds a resource."""
    resource = types.TextResourceContents(uri=resourceUri, mime_type="text/plain",
                                          text="Embedded resource content for testing.")
    return [UserMessage(content=types.EmbeddedResource(type="resource", resource=resource)),
            UserMessage(content=types.TextContent(type="text", text="Please process the embedded resource above."))]


@mcp.prompt(name="test_prompt_with_image")
def prompt_with_image() -> list[UserMessage]:
    """A prompt that includes an image."""
    return [UserMessage(content=types.ImageContent(type="image", data=PNG, mime_type="image/png")),
            UserMessage(content=types.TextContent(type="text", text="Please analyze the image above."))]


@mcp.completion()
async def complete(ref: Any, argument: types.CompletionArgument, context: Any) -> types.Completion:
    values = [v for v in COMPLETIONS.get(argument.name, []) if v.startswith(argument.value)]
    return types.Completion(values=values, total=len(values), has_more=False)


def http_app() -> Any:
    """The Streamable HTTP app at `/mcp`, resumable (SEP-1699)."""
    return mcp.streamable_http_app(event_store=MemoryEventStore(), retry_interval=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT")
    parser.add_argument("--in-band", action="store_true", help="tools report a failed request in their result")
    options = parser.parse_args()
    IN_BAND["on"] = options.in_band
    warnings.simplefilter("ignore", MCPDeprecationWarning)  # create_message and logging are handshake-era
    if options.http is None:
        mcp.run("stdio")
        return
    import uvicorn

    uvicorn.run(http_app(), host="127.0.0.1", port=options.http, log_level="warning")


if __name__ == "__main__":
    main()
