"""The list-changing hooks of `server-stateless` (SEP-2575), for `conformance_fixture.py`.

The suite opens a `subscriptions/listen` stream, calls `test_trigger_tool_change` (or
`test_trigger_prompt_change`) and expects `notifications/tools/list_changed` (or `prompts/...`) on the
stream within 1.5 s. Each call really changes the list, so a proxy in front has a change to carry: it
toggles one extra tool (or prompt), which keeps the lists bounded and back where they began after an
even number of calls. The change is announced in both eras: on the subscription bus that serves 2026-era
listen streams, and on every handshake-era connection that has read a list.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp import types
from mcp.server.subscriptions import InMemorySubscriptionBus, PromptsListChanged, ToolsListChanged
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

Context = Any
ToolFn = Callable[[Context, types.CallToolRequestParams], Awaitable[types.CallToolResult]]
_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}
ADDED_TOOL = types.Tool(name="test_tool_added_by_trigger", description="Listed while test_trigger_tool_change "
                        "has been called an odd number of times.", input_schema=_NO_ARGUMENTS)
ADDED_PROMPT = types.Prompt(name="test_prompt_added_by_trigger", description="Listed while "
                            "test_trigger_prompt_change has been called an odd number of times.")


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


class ListChanges:
    """The extra tool and prompt the triggers toggle, and the connections that hear of each toggle."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self.tool_added = False
        self.prompt_added = False
        self._readers: dict[str, Any] = {}  # connection key -> a ServerSession of that connection

    def reader(self, key: str, ctx: Context) -> None:
        """Remember a handshake-era connection that read a list: its list_changed goes on the connection."""
        if ctx.session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._readers[key] = ctx.session

    def tools(self) -> dict[str, tuple[types.Tool, ToolFn]]:
        """The two triggers, and the extra tool while it is added."""
        triggers = {
            "test_trigger_tool_change": ("Adds or removes test_tool_added_by_trigger, and says so.", self.toggle_tool),
            "test_trigger_prompt_change": ("Adds or removes test_prompt_added_by_trigger, and says so.",
                                           self.toggle_prompt),
        }
        listed = {name: (types.Tool(name=name, description=description, input_schema=_NO_ARGUMENTS), fn)
                  for name, (description, fn) in triggers.items()}
        if self.tool_added:
            listed[ADDED_TOOL.name] = (ADDED_TOOL, self.added_tool)
        return listed

    def prompts(self) -> list[types.Prompt]:
        return [ADDED_PROMPT] if self.prompt_added else []

    async def added_tool(self, ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        return _text("Added by test_trigger_tool_change.")

    @staticmethod
    def added_prompt() -> types.GetPromptResult:
        message = types.PromptMessage(role="user", content=types.TextContent(
            type="text", text="Added by test_trigger_prompt_change."))
        return types.GetPromptResult(description=ADDED_PROMPT.description, messages=[message])

    async def toggle_tool(self, ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        self.tool_added = not self.tool_added
        await self.bus.publish(ToolsListChanged())
        for session in list(self._readers.values()):
            await session.send_tool_list_changed()
        return _text(f"{ADDED_TOOL.name} {'added' if self.tool_added else 'removed'}")

    async def toggle_prompt(self, ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        self.prompt_added = not self.prompt_added
        await self.bus.publish(PromptsListChanged())
        for session in list(self._readers.values()):
            await session.send_prompt_list_changed()
        return _text(f"{ADDED_PROMPT.name} {'added' if self.prompt_added else 'removed'}")
