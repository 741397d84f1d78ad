/**
 * The server the MCP conformance suite's server scenarios expect, written on the TypeScript SDK v2
 * (`@modelcontextprotocol/server` 2.0.0; what it serves is in `ts_scenarios.mts`), so toolbridge is also
 * measured in front of a server that is not built on the Python SDK.
 *
 *     node tests/servers/ts_fixture.mts              # stdio, both eras (the SDK's `serveStdio`)
 *     node tests/servers/ts_fixture.mts --http 3001  # Streamable HTTP at http://127.0.0.1:3001/mcp
 *
 * Over HTTP, 2026-07-28 requests go to the SDK's per-request `createMcpHandler`; handshake-era requests
 * to a sessionful transport per session (with an event store, so a stream can be resumed), because the
 * SDK's own stateless fallback cannot carry server-to-client requests.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

import { toNodeHandler } from '@modelcontextprotocol/node';
import {
    type EventStore,
    type JSONRPCMessage,
    type McpRequestContext,
    McpServer,
    WebStandardStreamableHTTPServerTransport,
    createMcpHandler,
    hostHeaderValidationResponse,
    isInitializeRequest,
    isLegacyRequest,
    localhostAllowedHostnames,
    localhostAllowedOrigins,
    originValidationResponse
} from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';

import { onListChange, registerListTriggers } from './ts_list_triggers.mts';
import { register, states } from './ts_scenarios.mts';

/**
 * One server instance for one serving unit (a stdio connection, a handshake-era HTTP session, or one
 * 2026-07-28 HTTP request). Logging levels and resource subscriptions exist only in the handshake era
 * (2026-07-28 removed `logging/setLevel` and `resources/subscribe`), so only that era declares them. An
 * instance built for one HTTP request (`requestInfo`) does not follow the list triggers: the next is built anew.
 */
function build({ era, requestInfo }: Pick<McpRequestContext, 'era' | 'requestInfo'>): McpServer {
    const legacy = era === 'legacy';
    const server = new McpServer(
        { name: 'ts-conformance-fixture', version: '1.0.0' },
        {
            capabilities: { completions: {}, ...(legacy ? { logging: {}, resources: { subscribe: true } } : {}) },
            requestState: { verify: states.verify }
        }
    );
    register(server);
    registerListTriggers(server, requestInfo === undefined);
    if (legacy) {
        const subscriptions = new Set<string>();
        server.server.setRequestHandler('resources/subscribe', request => {
            subscriptions.add(request.params.uri);
            return {};
        });
        server.server.setRequestHandler('resources/unsubscribe', request => {
            subscriptions.delete(request.params.uri);
            return {};
        });
    }
    return server;
}

/** Every event of the process, in order, so a client can resume any stream (fixture-sized). */
class MemoryEventStore implements EventStore {
    private readonly events: [string, JSONRPCMessage][] = [];

    async storeEvent(streamId: string, message: JSONRPCMessage): Promise<string> {
        this.events.push([streamId, message]);
        return String(this.events.length);
    }

    async replayEventsAfter(lastEventId: string, { send }: { send: (eventId: string, message: JSONRPCMessage) => Promise<void> }) {
        const last = Number(lastEventId);
        const streamId = this.events[last - 1]?.[0];
        if (!Number.isInteger(last) || streamId === undefined) throw new Error(`unknown event id ${lastEventId}`);
        for (let index = last; index < this.events.length; index++) {
            const [stream, message] = this.events[index]!;
            if (stream === streamId) await send(String(index + 1), message);
        }
        return streamId;
    }
}

function jsonError(status: number, code: number, message: string): Response {
    return Response.json({ jsonrpc: '2.0', id: null, error: { code, message } }, { status });
}

/** The `/mcp` endpoint: localhost Host and Origin only (DNS rebinding), then each era to its own serving. */
function httpEndpoint(): (request: Request) => Promise<Response> {
    const modern = createMcpHandler(build, { legacy: 'reject' });
    onListChange(kind => (kind === 'tools' ? modern.notify.toolsChanged() : modern.notify.promptsChanged()));
    const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();
    const events = new MemoryEventStore();

    async function handshakeEra(request: Request): Promise<Response> {
        const sessionId = request.headers.get('mcp-session-id');
        if (sessionId) {
            return sessions.get(sessionId)?.handleRequest(request) ?? jsonError(404, -32001, 'Session not found');
        }
        const body = request.method === 'POST' ? await request.clone().json().catch(() => undefined) : undefined;
        if (!isInitializeRequest(body)) return jsonError(400, -32000, 'Bad Request: no valid session ID provided');
        const transport = new WebStandardStreamableHTTPServerTransport({
            sessionIdGenerator: randomUUID,
            eventStore: events,
            retryInterval: 100,
            onsessioninitialized: id => void sessions.set(id, transport),
            onsessionclosed: id => void sessions.delete(id)
        });
        await build({ era: 'legacy' }).connect(transport);
        return transport.handleRequest(request, { parsedBody: body });
    }

    return async request => {
        if (new URL(request.url).pathname !== '/mcp') return new Response('Not Found', { status: 404 });
        const refused =
            hostHeaderValidationResponse(request, localhostAllowedHostnames()) ?? originValidationResponse(request, localhostAllowedOrigins());
        if (refused) return refused;
        return (await isLegacyRequest(request)) ? handshakeEra(request) : modern.fetch(request);
    };
}

function main(): void {
    const { values } = parseArgs({ options: { http: { type: 'string' } } });
    if (values.http === undefined) {
        serveStdio(build);
        return;
    }
    const port = Number(values.http);
    const handler = toNodeHandler({ fetch: httpEndpoint() });
    createServer((req, res) => void handler(req, res)).listen(port, '127.0.0.1', () => {
        console.error(`ts-conformance-fixture: http://127.0.0.1:${port}/mcp`);
    });
}

main();
