"""MCP-Bench's set builder (bench/public_sets.py): tools read from server source, and the gold a task names.

Small inline sources in the forms MCP-Bench's servers use; the MCP-Bench snapshot itself is not needed.
"""

from __future__ import annotations

from bench.public_sets import resolve_gold
from bench.python_source import python_tools
from bench.script_source import script_tools

SERVERS = {"Math MCP": ["mean", "median", "max", "add"], "Scientific Computing": ["rank", "create_tensor", "add"],
           "Paper Search": ["search_arxiv"]}


def test_gold_is_a_prefixed_name_or_a_bare_identifier() -> None:
    gold, unresolved = resolve_gold("Use Paper Search:search_arxiv, then create_tensor on the result.", SERVERS)
    assert gold == [("Paper Search", "search_arxiv"), ("Scientific Computing", "create_tensor")]
    assert unresolved == []


def test_a_list_after_a_prefix_names_every_tool_in_it() -> None:
    gold, _ = resolve_gold("Step 4 (Math MCP:mean, median, max): combine them", SERVERS)
    assert gold == [("Math MCP", "max"), ("Math MCP", "mean"), ("Math MCP", "median")]


def test_a_plain_word_in_prose_is_not_a_tool_but_a_call_is() -> None:
    assert resolve_gold("Compute the rank of M and pick the max value.", SERVERS)[0] == []
    assert resolve_gold("r = rank(M); then `max`", SERVERS)[0] == [("Math MCP", "max"),
                                                                     ("Scientific Computing", "rank")]


def test_a_bare_name_two_servers_share_needs_its_server() -> None:
    assert resolve_gold("call add(a, b)", SERVERS)[0] == []
    assert resolve_gold("call Math MCP:add", SERVERS)[0] == [("Math MCP", "add")]


def test_a_prefixed_name_no_server_has_is_reported() -> None:
    assert resolve_gold("Paper Search:search_scholar", SERVERS) == ([], ["Paper Search:search_scholar"])


def test_python_tools_read_fastmcp_functions_and_lowlevel_tool_literals() -> None:
    fastmcp = '''
from typing import Annotated, Literal
Unit = Literal["m", "km"]

def register(mcp):
    @mcp.tool()
    async def convert(value: Annotated[float, Field(description="how much")], unit: Unit = "m", ctx: Context = None):
        """Convert a length."""
'''
    lowlevel = '''
class Names(str, Enum):
    NOW = "get_now"

@server.list_tools()
async def tools():
    return [Tool(name=Names.NOW.value, description=f"Now in {zone}", inputSchema={"type": "object"})]
'''
    assert python_tools([fastmcp, lowlevel]) == [
        {"name": "convert", "description": "Convert a length.", "inputSchema": {
            "type": "object", "properties": {"value": {"type": "number", "description": "how much"},
                                             "unit": {"enum": ["m", "km"], "type": "string"}},
            "required": ["value"]}},
        {"name": "get_now", "description": "Now in ", "inputSchema": {"type": "object"}}]


def test_script_tools_read_tool_calls_handler_arrays_and_bindings() -> None:
    calls = '''
server.tool('getPools', 'Top pools ' + "on a network", {
  network: z.string().describe('Network id'),  // a comment
  sort: z.enum(['asc', 'desc']).optional().default('desc'),
}, async ({ network }) => { return fetch(`/n/${network}`); });
'''
    handler = '''
import { FindSchema } from "./schemas.js";
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [
  { name: "findParks", description: `Find parks`, inputSchema: zodToJsonSchema(FindSchema) },
  { name: "list_icons", description: "All icons", inputSchema: { type: "object", properties: {}, required: [] } },
]}));
'''
    schemas = "export const FindSchema = z.object({ q: z.string().optional().describe('Search term') });"
    binding = '''
export class GetObject {
  public readonly name: string = 'get-object';
  public readonly description: string = 'One object';
  public readonly inputSchema = z.object({ id: z.number().int() });
}
'''
    tools = {t["name"]: t for t in script_tools([calls, handler, schemas, binding])}
    assert tools["getPools"] == {"name": "getPools", "description": "Top pools on a network", "inputSchema": {
        "type": "object", "properties": {"network": {"type": "string", "description": "Network id"},
                                         "sort": {"type": "string", "enum": ["asc", "desc"]}},
        "required": ["network"]}}
    assert tools["findParks"]["inputSchema"] == {"type": "object", "properties": {
        "q": {"type": "string", "description": "Search term"}}}
    assert tools["list_icons"]["inputSchema"] == {"type": "object", "properties": {}, "required": []}
    assert tools["get-object"]["inputSchema"] == {"type": "object", "properties": {"id": {"type": "integer"}},
                                                  "required": ["id"]}
    assert set(tools) == {"getPools", "findParks", "list_icons", "get-object"}
