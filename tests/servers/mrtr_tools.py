"""The 2026-07-28 scenarios of `@modelcontextprotocol/conformance` 0.2.x, for `conformance_fixture.py`.

Multi round-trip tools (SEP-2322) under the names and input-request keys the scenarios use, the
prompt that asks for input (and a resource that does, which no scenario reads), and the stateless
diagnostics of `server-stateless` (SEP-2575). Each round's `requestState` is its own, HMAC-sealed,
so a replayed or tampered state is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from mcp import MCPError, types

Context = Any
Params = types.CallToolRequestParams | types.GetPromptRequestParams | types.ReadResourceRequestParams
ToolResult = types.CallToolResult | types.InputRequiredResult
ToolFn = Callable[[Context, types.CallToolRequestParams], Awaitable[ToolResult]]
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
_KEY = secrets.token_bytes(32)
_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}


def seal(state: dict[str, Any]) -> str:
    body = base64.urlsafe_b64encode(json.dumps(state, sort_keys=True).encode()).decode()
    return f"{body}.{hmac.new(_KEY, body.encode(), hashlib.sha256).hexdigest()}"


def unseal(token: str | None) -> dict[str, Any]:
    """The state sealed into `token` (`{}` without one).

    Raises:
        MCPError: (invalid params) the token was not sealed here or was altered.
    """
    if token is None:
        return {}
    body, _, mac = token.rpartition(".")
    if not hmac.compare_digest(mac, hmac.new(_KEY, body.encode(), hashlib.sha256).hexdigest()):
        raise MCPError(types.INVALID_PARAMS, "requestState failed its integrity check")
    return json.loads(base64.urlsafe_b64decode(body))


def elicit(message: str, field: str, kind: str = "string") -> types.ElicitRequest:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))


def sample(text: str, max_tokens: int) -> types.CreateMessageRequest:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))
    return types.CreateMessageRequest(params=types.CreateMessageRequestParams(messages=[message],
                                                                              max_tokens=max_tokens))


ROOTS = types.ListRootsRequest()


def answers(params: Params) -> dict[str, dict[str, Any]]:
    """The input responses as plain wire dicts, keyed as the client sent them."""
    return {key: value.model_dump(mode="json", by_alias=True, exclude_none=True)
            for key, value in (params.input_responses or {}).items()}


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def _needs(params: Params, requests: dict[str, types.InputRequest], state: dict[str, Any] | None = None
           ) -> types.InputRequiredResult | None:
    """An input-required result for the keys the client has not answered, or None when all are answered."""
    missing = {key: request for key, request in requests.items() if key not in answers(params)}
    if not missing:
        return None
    return types.InputRequiredResult(input_requests=missing,
                                     request_state=None if state is None else seal(state))


async def ask_name(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    if asked := _needs(params, {"user_name": elicit("What is your name?", "name")}):
        return asked
    return _text(f"Hello, {answers(params)['user_name'].get('content', {}).get('name', 'stranger')}!")


async def ask_capital(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    if asked := _needs(params, {"capital_question": sample("What is the capital of France?", 100)}):
        return asked
    content = answers(params)["capital_question"].get("content", {})
    return _text(f"Sampled: {content.get('text', '') if isinstance(content, dict) else content}")


async def ask_roots(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    if asked := _needs(params, {"client_roots": ROOTS}):
        return asked
    return _text("Roots: " + ", ".join(root.get("uri", "") for root in answers(params)["client_roots"]
                                       .get("roots", [])))


async def ask_with_state(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    state = unseal(params.request_state)
    if asked := _needs(params, {"confirm": elicit("Please confirm", "ok", "boolean")}, {"round": 1}):
        return asked
    return _text("state-ok" if state.get("round") == 1 else "no state")


async def ask_three(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    unseal(params.request_state)
    requests: dict[str, types.InputRequest] = {
        "user_name": elicit("What is your name?", "name"),
        "greeting": sample("Generate a greeting", 50),
        "client_roots": ROOTS,
    }
    if asked := _needs(params, requests, {"round": 1}):
        return asked
    return _text(f"Got {', '.join(sorted(answers(params)))}")


async def ask_twice(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    """Round 1 asks for a name, round 2 (state 1) for a colour, round 3 (state 2) completes."""
    state = unseal(params.request_state)
    given = answers(params)
    if state.get("round") == 2 and "step2" in given:
        return _text(f"{state['name']} likes {given['step2'].get('content', {}).get('color')}")
    if state.get("round") == 1 and "step1" in given:
        name = given["step1"].get("content", {}).get("name")
        return types.InputRequiredResult(
            input_requests={"step2": elicit("Step 2: What is your favorite color?", "color")},
            request_state=seal({"round": 2, "name": name}))
    return types.InputRequiredResult(input_requests={"step1": elicit("Step 1: What is your name?", "name")},
                                     request_state=seal({"round": 1}))


async def ask_sealed(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    unseal(params.request_state)
    if asked := _needs(params, {"confirm": elicit("Please confirm", "ok", "boolean")}, {"round": 1}):
        return asked
    return _text("state verified")


def _declared(ctx: Context, capability: types.ClientCapabilities) -> bool:
    return bool(ctx.session.check_client_capability(capability))


async def ask_what_it_can(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    """Asks only through the capabilities that this request's client declared."""
    requests: dict[str, types.InputRequest] = {}
    if _declared(ctx, types.ClientCapabilities(sampling=types.SamplingCapability())):
        requests["capital_question"] = sample("What is the capital of France?", 100)
    if _declared(ctx, types.ClientCapabilities(elicitation=types.ElicitationCapability())):
        requests["user_name"] = elicit("What is your name?", "name")
    if asked := _needs(params, requests):
        return asked
    return _text(f"Answered: {', '.join(sorted(answers(params))) or 'nothing asked'}")


async def needs_sampling(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    if not _declared(ctx, types.ClientCapabilities(sampling=types.SamplingCapability())):
        raise MCPError(MISSING_REQUIRED_CLIENT_CAPABILITY, "This tool needs the sampling capability",
                       {"requiredCapabilities": {"sampling": {}}})
    return await ask_capital(ctx, params)


async def streaming_elicitation(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    """Asks in the result, never on the response stream (SEP-2575)."""
    if asked := _needs(params, {"confirm": elicit("Continue?", "ok", "boolean")}):
        return asked
    return _text("confirmed")


async def logging_tool(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    await ctx.session.send_log_message("info", "logging tool ran", "conformance-fixture",
                                       related_request_id=ctx.request_id)
    return _text("logged")


TOOLS: dict[str, tuple[str, ToolFn]] = {
    "test_input_required_result_elicitation": ("Asks the user's name as input required.", ask_name),
    "test_input_required_result_sampling": ("Asks the client's LLM as input required.", ask_capital),
    "test_input_required_result_list_roots": ("Asks the client's roots as input required.", ask_roots),
    "test_input_required_result_request_state": ("Asks with a sealed requestState.", ask_with_state),
    "test_input_required_result_multiple_inputs": ("Asks three things at once.", ask_three),
    "test_input_required_result_multi_round": ("Asks in two rounds, each with its own state.", ask_twice),
    "test_input_required_result_tampered_state": ("Refuses an altered requestState.", ask_sealed),
    "test_input_required_result_capabilities": ("Asks only what the client declared.", ask_what_it_can),
    "test_missing_capability": ("Refuses a client without sampling (-32021).", needs_sampling),
    "test_streaming_elicitation": ("Asks in its result, never on the stream.", streaming_elicitation),
    "test_logging_tool": ("Logs one message (sent only at a requested log level).", logging_tool),
}


def tools() -> dict[str, tuple[types.Tool, ToolFn]]:
    return {name: (types.Tool(name=name, description=description, input_schema=_NO_ARGUMENTS), fn)
            for name, (description, fn) in TOOLS.items()}


PROMPT = types.Prompt(name="test_input_required_result_prompt", description="A prompt that asks for its context.")


def get_prompt(params: types.GetPromptRequestParams) -> types.GetPromptResult | types.InputRequiredResult:
    if asked := _needs(params, {"user_context": elicit("What context should the prompt use?", "context")}):
        return asked
    context = answers(params)["user_context"].get("content", {}).get("context", "")
    message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=f"Context: {context}"))
    return types.GetPromptResult(description=PROMPT.description, messages=[message])


RESOURCE = types.Resource(uri="test://input-required-resource", name="input-required-resource", mime_type="text/plain",
                          description="A resource whose read asks for input first.")


def read_resource(params: types.ReadResourceRequestParams) -> types.ReadResourceResult | types.InputRequiredResult:
    if asked := _needs(params, {"reader_name": elicit("Who is reading?", "name")}):
        return asked
    name = answers(params)["reader_name"].get("content", {}).get("name", "")
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=RESOURCE.uri, mime_type="text/plain",
                                                                         text=f"Read by {name}")])
