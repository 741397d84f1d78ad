// A TypeScript SDK server (stdio) whose tools ask the client mid-call: a third upstream shape for the relay
// tests, next to the lowlevel and MCPServer fixtures. Requests go out as the TS SDK sends them, related
// to the tool's request (`relatedRequestId`), in the handshake era (the only one this SDK speaks).
//
//     node tests/servers/ts_asker.mjs
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "ts-asker", version: "1.0.0" });
const text = (value) => ({ content: [{ type: "text", text: value }] });

server.registerTool("whoami_sampling", {
  description: "Samples with the tag as the prompt and returns the answer.",
  inputSchema: { tag: z.string() },
}, async ({ tag }, extra) => {
  const result = await server.server.createMessage({
    messages: [{ role: "user", content: { type: "text", text: tag } }], maxTokens: 10,
  }, { relatedRequestId: extra.requestId });
  return text(result.content.type === "text" ? result.content.text : "(no text)");
});

server.registerTool("ask_name", {
  description: "Elicits a name (form mode) and returns what the user did.",
  inputSchema: {},
}, async (_args, extra) => {
  const result = await server.server.elicitInput({
    message: "Who are you?",
    requestedSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
  }, { relatedRequestId: extra.requestId });
  return text(`${result.action}:${JSON.stringify(result.content ?? {})}`);
});

server.registerTool("ask_url", {
  description: "Elicits a visit to a URL (URL mode) and returns what the user did.",
  inputSchema: {},
}, async (_args, extra) => {
  const result = await server.server.elicitInput({
    mode: "url", message: "Sign in", url: "https://example.com/login", elicitationId: "e-1",
  }, { relatedRequestId: extra.requestId });
  return text(result.action);
});

server.registerTool("list_roots", {
  description: "Asks the client for its roots and returns their URIs.",
  inputSchema: {},
}, async (_args, extra) => {
  const result = await server.server.listRoots(undefined, { relatedRequestId: extra.requestId });
  return text(result.roots.map((root) => root.uri).join(","));
});

await server.connect(new StdioServerTransport());
