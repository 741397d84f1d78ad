/**
 * What the TypeScript conformance fixture (`ts_fixture.mts`) serves: every tool, resource, template and
 * prompt a scored scenario calls, under the names of `conformance_fixture.py` and `mrtr_tools.py`.
 *
 * Every handler is written once in the 2026-07-28 style: it asks the client by returning
 * `inputRequired(...)`, and on a 2025-11-25 connection the SDK's legacy shim puts those requests to the
 * client over the back channel and calls the handler again with the answers.
 */
import { randomBytes } from 'node:crypto';

import {
    CLIENT_CAPABILITIES_META_KEY,
    type CallToolResult,
    type GetPromptResult,
    type InputRequest,
    type InputRequiredResult,
    type McpServer,
    ResourceTemplate,
    type ServerContext,
    completable,
    createRequestStateCodec,
    fromJsonSchema,
    inputRequired,
    inputResponse
} from '@modelcontextprotocol/server';
import { z } from 'zod';

// A 1x1 PNG and a silent WAV: the smallest valid payloads of each kind.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=';
const COMPLETIONS: Record<string, string[]> = {
    arg1: ['paris', 'park', 'party', 'test'],
    arg2: ['world', 'work'],
    id: ['123', '456']
};

type ToolResult = CallToolResult | InputRequiredResult;
type Schema = Record<string, unknown>;
type State = { round: number; name?: string };

// Each round's requestState is sealed (HMAC) by the SDK's codec; the seam refuses an altered one (-32602).
export const states = createRequestStateCodec<State>({ key: randomBytes(32) });

const USER_SCHEMA: Schema = {
    type: 'object',
    properties: {
        username: { type: 'string', description: "User's response" },
        email: { type: 'string', description: "User's email address" }
    },
    required: ['username', 'email']
};
const SEP1034_SCHEMA: Schema = {
    type: 'object',
    properties: {
        name: { type: 'string', description: 'User name', default: 'John Doe' },
        age: { type: 'integer', description: 'User age', default: 30 },
        score: { type: 'number', description: 'User score', default: 95.5 },
        status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
        verified: { type: 'boolean', description: 'Verification status', default: true }
    }
};
const SEP1330_SCHEMA: Schema = {
    type: 'object',
    properties: {
        untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
        titledSingle: {
            type: 'string',
            oneOf: [
                { const: 'value1', title: 'First Option' },
                { const: 'value2', title: 'Second Option' },
                { const: 'value3', title: 'Third Option' }
            ]
        },
        legacyEnum: { type: 'string', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
        untitledMulti: { type: 'array', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
        titledMulti: {
            type: 'array',
            items: {
                anyOf: [
                    { const: 'value1', title: 'First Choice' },
                    { const: 'value2', title: 'Second Choice' },
                    { const: 'value3', title: 'Third Choice' }
                ]
            }
        }
    }
};
const JSON_SCHEMA_2020_12: Schema = {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    $defs: { address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
    properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
    additionalProperties: false
};

function text(value: string, isError = false): CallToolResult {
    return { content: [{ type: 'text', text: value }], ...(isError ? { isError } : {}) };
}

function elicit(message: string, requestedSchema: Schema): InputRequest {
    return { method: 'elicitation/create', params: { message, requestedSchema } } as InputRequest;
}

function field(message: string, name: string, kind = 'string'): InputRequest {
    return elicit(message, { type: 'object', properties: { [name]: { type: kind } }, required: [name] });
}

function sample(prompt: string, maxTokens: number): InputRequest {
    return inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens });
}

/** Input required for what this round leaves unanswered (with `state`, sealed), or undefined once all is answered. */
async function needs(ctx: ServerContext, requests: Record<string, InputRequest>, state?: State) {
    const missing = Object.fromEntries(
        Object.entries(requests).filter(([key]) => inputResponse(ctx.mcpReq.inputResponses, key).kind === 'missing')
    );
    if (Object.keys(missing).length === 0) return undefined;
    return inputRequired({ inputRequests: missing, ...(state ? { requestState: await states.mint(state) } : {}) });
}

function sampled(ctx: ServerContext, key: string): string {
    const view = inputResponse(ctx.mcpReq.inputResponses, key);
    const content = view.kind === 'sampling' ? view.result.content : undefined;
    return content && !Array.isArray(content) && content.type === 'text' ? content.text : '';
}

function elicited(ctx: ServerContext, key: string): Record<string, unknown> {
    const view = inputResponse(ctx.mcpReq.inputResponses, key);
    return view.kind === 'elicit' ? (view.content ?? {}) : {};
}

/** The client capabilities this request declares (2026-07-28), or the connection's (handshake era). */
function declared(ctx: ServerContext, server: McpServer): Record<string, unknown> {
    const envelope: Record<string, unknown> = ctx.mcpReq.envelope ?? {};
    return (envelope[CLIENT_CAPABILITIES_META_KEY] ?? server.server.getClientCapabilities() ?? {}) as Record<string, unknown>;
}

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

/** The handshake-era tools of `conformance_fixture.py`, asking through input required (the shim serves 2025). */
function registerHandshakeEraTools(server: McpServer): void {
    const tool = (name: string, description: string, handler: (ctx: ServerContext) => Promise<ToolResult> | ToolResult) =>
        server.registerTool(name, { description }, handler);

    tool('test_simple_text', 'Returns simple text content.', () => text('This is a simple text response for testing.'));
    tool('test_image_content', 'Returns a PNG image.', () => ({ content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] }));
    tool('test_audio_content', 'Returns a WAV audio clip.', () => ({ content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] }));
    tool('test_embedded_resource', 'Returns an embedded text resource.', () => ({
        content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }]
    }));
    tool('test_multiple_content_types', 'Returns text, an image and an embedded resource.', () => ({
        content: [
            { type: 'text', text: 'Multiple content types test:' },
            { type: 'image', data: PNG, mimeType: 'image/png' },
            {
                type: 'resource',
                resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: JSON.stringify({ test: 'data', value: 123 }) }
            }
        ]
    }));
    tool('test_tool_with_logging', 'Sends three info log messages while it runs.', async ctx => {
        await ctx.mcpReq.log('info', 'Tool execution started', 'ts-fixture');
        await sleep(50);
        await ctx.mcpReq.log('info', 'Tool processing data', 'ts-fixture');
        await sleep(50);
        await ctx.mcpReq.log('info', 'Tool execution completed', 'ts-fixture');
        return text('Tool with logging executed successfully');
    });
    tool('test_error_handling', 'Always returns an error result.', () => text('This tool intentionally returns an error for testing', true));
    tool('test_tool_with_progress', 'Reports progress 0, 50 and 100 of 100.', async ctx => {
        const progressToken = ctx.mcpReq._meta?.progressToken;
        for (const progress of [0, 50, 100]) {
            if (progressToken !== undefined) {
                await ctx.mcpReq.notify({
                    method: 'notifications/progress',
                    params: { progressToken, progress, total: 100, message: `Completed step ${progress} of 100` }
                });
            }
            if (progress < 100) await sleep(50);
        }
        return text('Tool with progress executed successfully');
    });
    server.registerTool(
        'test_sampling',
        {
            description: "Asks the client's LLM to answer the prompt.",
            inputSchema: z.object({ prompt: z.string().describe('The prompt to send to the LLM') })
        },
        async ({ prompt }, ctx) => {
            const asked = await needs(ctx, { sampling: sample(prompt, 100) });
            return asked ?? text(`LLM response: ${sampled(ctx, 'sampling') || '(no text)'}`);
        }
    );
    const elicitation = async (ctx: ServerContext, message: string, schema: Schema, label: string) => {
        const asked = await needs(ctx, { elicitation: elicit(message, schema) });
        if (asked) return asked;
        const view = inputResponse(ctx.mcpReq.inputResponses, 'elicitation');
        return text(`${label}: action=${view.kind === 'elicit' ? view.action : 'cancel'}, content=${JSON.stringify(elicited(ctx, 'elicitation'))}`);
    };
    server.registerTool(
        'test_elicitation',
        {
            description: 'Asks the user for a username and an email address.',
            inputSchema: z.object({ message: z.string().describe('The message to show the user') })
        },
        ({ message }, ctx) => elicitation(ctx, message, USER_SCHEMA, 'User response')
    );
    tool('test_elicitation_sep1034_defaults', 'Elicits one field of each primitive type, each with a default.', ctx =>
        elicitation(ctx, 'Please provide user information', SEP1034_SCHEMA, 'Elicitation completed')
    );
    tool('test_elicitation_sep1330_enums', 'Elicits the five kinds of enum field.', ctx =>
        elicitation(ctx, 'Please select values using each kind of enum', SEP1330_SCHEMA, 'Elicitation completed')
    );
    server.registerTool(
        'json_schema_2020_12_tool',
        { description: 'Tool with JSON Schema 2020-12 features', inputSchema: fromJsonSchema(JSON_SCHEMA_2020_12) },
        async args => text(`Received: ${JSON.stringify(args)}`)
    );
    tool('test_reconnection', 'Closes its SSE stream mid-call, then answers after the client resumes.', async ctx => {
        await ctx.mcpReq.log('info', 'Before disconnect', 'ts-fixture');
        if (ctx.http?.closeSSE) {
            ctx.http.closeSSE();
            await sleep(200);
        }
        await ctx.mcpReq.log('info', 'After reconnect', 'ts-fixture');
        return text('Reconnection test completed');
    });
}

/** The 2026-07-28 multi round-trip tools (SEP-2322) and stateless diagnostics (SEP-2575) of `mrtr_tools.py`. */
function registerRoundTripTools(server: McpServer): void {
    const tool = (name: string, description: string, handler: (ctx: ServerContext) => Promise<ToolResult>) =>
        server.registerTool(name, { description }, handler);
    const roots: InputRequest = inputRequired.listRoots();

    tool('test_input_required_result_elicitation', "Asks the user's name as input required.", async ctx => {
        const asked = await needs(ctx, { user_name: field('What is your name?', 'name') });
        return asked ?? text(`Hello, ${elicited(ctx, 'user_name').name ?? 'stranger'}!`);
    });
    tool('test_input_required_result_sampling', "Asks the client's LLM as input required.", async ctx => {
        const asked = await needs(ctx, { capital_question: sample('What is the capital of France?', 100) });
        return asked ?? text(`Sampled: ${sampled(ctx, 'capital_question')}`);
    });
    tool('test_input_required_result_list_roots', "Asks the client's roots as input required.", async ctx => {
        const asked = await needs(ctx, { client_roots: roots });
        if (asked) return asked;
        const view = inputResponse(ctx.mcpReq.inputResponses, 'client_roots');
        return text(`Roots: ${(view.kind === 'roots' ? view.roots : []).map(root => root.uri).join(', ')}`);
    });
    tool('test_input_required_result_request_state', 'Asks with a sealed requestState.', async ctx => {
        const state = ctx.mcpReq.requestState<State>();
        const asked = await needs(ctx, { confirm: field('Please confirm', 'ok', 'boolean') }, { round: 1 });
        return asked ?? text(state?.round === 1 ? 'state-ok' : 'no state');
    });
    tool('test_input_required_result_multiple_inputs', 'Asks three things at once.', async ctx => {
        const requests = {
            user_name: field('What is your name?', 'name'),
            greeting: sample('Generate a greeting', 50),
            client_roots: roots
        };
        const asked = await needs(ctx, requests, { round: 1 });
        return asked ?? text(`Got ${Object.keys(requests).sort().join(', ')}`);
    });
    tool('test_input_required_result_multi_round', 'Asks in two rounds, each with its own state.', async ctx => {
        const state = ctx.mcpReq.requestState<State>();
        const given = (key: string) => inputResponse(ctx.mcpReq.inputResponses, key).kind !== 'missing';
        if (state?.round === 2 && given('step2')) return text(`${state.name} likes ${elicited(ctx, 'step2').color}`);
        if (state?.round === 1 && given('step1')) {
            const name = String(elicited(ctx, 'step1').name ?? '');
            return inputRequired({
                inputRequests: { step2: field('Step 2: What is your favorite color?', 'color') },
                requestState: await states.mint({ round: 2, name })
            });
        }
        return inputRequired({
            inputRequests: { step1: field('Step 1: What is your name?', 'name') },
            requestState: await states.mint({ round: 1 })
        });
    });
    tool('test_input_required_result_tampered_state', 'Refuses an altered requestState.', async ctx => {
        const asked = await needs(ctx, { confirm: field('Please confirm', 'ok', 'boolean') }, { round: 1 });
        return asked ?? text('state verified');
    });
    tool('test_input_required_result_capabilities', 'Asks only what the client declared.', async ctx => {
        const capabilities = declared(ctx, server);
        const requests: Record<string, InputRequest> = {};
        if (capabilities.sampling) requests.capital_question = sample('What is the capital of France?', 100);
        if (capabilities.elicitation) requests.user_name = field('What is your name?', 'name');
        const asked = await needs(ctx, requests);
        return asked ?? text(`Answered: ${Object.keys(requests).sort().join(', ') || 'nothing asked'}`);
    });
    // Asking a client that declared no sampling: the SDK's seam answers -32021 (MissingRequiredClientCapability).
    tool('test_missing_capability', 'Refuses a client without sampling (-32021).', async ctx => {
        const asked = await needs(ctx, { capital_question: sample('What is the capital of France?', 100) });
        return asked ?? text('Sampled');
    });
    tool('test_streaming_elicitation', 'Asks in its result, never on the stream.', async ctx => {
        const asked = await needs(ctx, { confirm: field('Continue?', 'ok', 'boolean') });
        return asked ?? text('confirmed');
    });
    tool('test_logging_tool', 'Logs one message (sent only at a requested log level).', async ctx => {
        await ctx.mcpReq.log('info', 'logging tool ran', 'ts-fixture');
        return text('logged');
    });
}

function registerResources(server: McpServer): void {
    const statics: [string, string, string, Record<string, unknown>][] = [
        ['static-text', 'text/plain', 'A static text resource.', { text: 'This is the content of the static text resource.' }],
        ['static-binary', 'image/png', 'A static binary resource (a PNG image).', { blob: PNG }],
        ['watched-resource', 'text/plain', 'A resource that clients can subscribe to.', { text: 'Watched resource content' }]
    ];
    for (const [name, mimeType, description, body] of statics) {
        const uri = `test://${name}`;
        server.registerResource(name, uri, { mimeType, description }, async () => ({
            contents: [{ uri, mimeType, ...body } as { uri: string; mimeType: string; text: string }]
        }));
    }
    const template = new ResourceTemplate('test://template/{id}/data', {
        list: undefined,
        complete: { id: value => COMPLETIONS.id!.filter(candidate => candidate.startsWith(value)) }
    });
    server.registerResource(
        'template-data',
        template,
        { mimeType: 'application/json', description: 'Data for one id, substituted into the URI.' },
        async (uri, { id }) => ({
            contents: [
                {
                    uri: uri.href,
                    mimeType: 'application/json',
                    text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` })
                }
            ]
        })
    );
}

function registerPrompts(server: McpServer): void {
    const user = (content: GetPromptResult['messages'][number]['content']) => ({ role: 'user' as const, content });
    const completing = (name: string, description: string) =>
        completable(z.string().describe(description), value => COMPLETIONS[name]!.filter(candidate => candidate.startsWith(value)));

    server.registerPrompt('test_simple_prompt', { description: 'A simple prompt without arguments.' }, () => ({
        messages: [user({ type: 'text', text: 'This is a simple prompt for testing.' })]
    }));
    server.registerPrompt(
        'test_prompt_with_arguments',
        {
            description: 'A prompt with two required arguments.',
            argsSchema: z.object({ arg1: completing('arg1', 'First test argument'), arg2: completing('arg2', 'Second test argument') })
        },
        ({ arg1, arg2 }) => ({ messages: [user({ type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` })] })
    );
    server.registerPrompt(
        'test_prompt_with_embedded_resource',
        {
            description: 'A prompt that embeds a resource.',
            argsSchema: z.object({ resourceUri: z.string().describe('URI of the resource to embed') })
        },
        ({ resourceUri }) => ({
            messages: [
                user({ type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } }),
                user({ type: 'text', text: 'Please process the embedded resource above.' })
            ]
        })
    );
    server.registerPrompt('test_prompt_with_image', { description: 'A prompt that includes an image.' }, () => ({
        messages: [user({ type: 'image', data: PNG, mimeType: 'image/png' }), user({ type: 'text', text: 'Please analyze the image above.' })]
    }));
    server.registerPrompt('test_input_required_result_prompt', { description: 'A prompt that asks for its context.' }, async ctx => {
        const asked = await needs(ctx, { user_context: field('What context should the prompt use?', 'context') });
        if (asked) return asked;
        return {
            description: 'A prompt that asks for its context.',
            messages: [user({ type: 'text', text: `Context: ${elicited(ctx, 'user_context').context ?? ''}` })]
        };
    });
}

/** Registers the whole surface on `server`. */
export function register(server: McpServer): void {
    registerHandshakeEraTools(server);
    registerRoundTripTools(server);
    registerResources(server);
    registerPrompts(server);
}
