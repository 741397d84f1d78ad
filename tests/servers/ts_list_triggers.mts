/**
 * The list-changing hooks of `server-stateless` (SEP-2575) for the TypeScript fixture, as `list_triggers.py`
 * is for the Python one: `test_trigger_tool_change` (`test_trigger_prompt_change`) toggles one extra tool
 * (prompt) for the whole process and announces it, so a proxy in front has a real change to carry.
 *
 * An instance that serves a connection or a handshake-era session follows each toggle itself, and the SDK
 * sends its list_changed (on the connection in the handshake era, onto the listen streams of a 2026-07-28
 * stdio connection). A 2026-07-28 HTTP instance serves one request: it is built with the lists as they are,
 * and that era's listen streams hear of a toggle from the handler's bus (`onListChange` in `ts_fixture.mts`).
 */
import type { CallToolResult, McpServer } from '@modelcontextprotocol/server';

export type ListKind = 'tools' | 'prompts';

const ADDED_TOOL = 'test_tool_added_by_trigger';
const ADDED_PROMPT = 'test_prompt_added_by_trigger';
const added: Record<ListKind, boolean> = { tools: false, prompts: false };
const listeners = new Set<(kind: ListKind) => void>();

/** Calls `listener` after each toggle; returns the function that stops it. */
export function onListChange(listener: (kind: ListKind) => void): () => void {
    listeners.add(listener);
    return () => void listeners.delete(listener);
}

function text(value: string): CallToolResult {
    return { content: [{ type: 'text', text: value }] };
}

function toggle(kind: ListKind): CallToolResult {
    added[kind] = !added[kind];
    for (const listener of listeners) listener(kind);
    return text(`${kind === 'tools' ? ADDED_TOOL : ADDED_PROMPT} ${added[kind] ? 'added' : 'removed'}`);
}

/** Registers the two triggers, and the extra tool and prompt (enabled while added); `follows` for an instance
 * that outlives one request. */
export function registerListTriggers(server: McpServer, follows: boolean): void {
    server.registerTool('test_trigger_tool_change', { description: `Adds or removes ${ADDED_TOOL}, and says so.` }, () =>
        toggle('tools')
    );
    server.registerTool('test_trigger_prompt_change', { description: `Adds or removes ${ADDED_PROMPT}, and says so.` }, () =>
        toggle('prompts')
    );
    const tool = server.registerTool(
        ADDED_TOOL,
        { description: 'Listed while test_trigger_tool_change has been called an odd number of times.' },
        () => text('Added by test_trigger_tool_change.')
    );
    const prompt = server.registerPrompt(
        ADDED_PROMPT,
        { description: 'Listed while test_trigger_prompt_change has been called an odd number of times.' },
        () => ({ messages: [{ role: 'user', content: { type: 'text', text: 'Added by test_trigger_prompt_change.' } }] })
    );
    const follow = (kind: ListKind) => {
        const entry = kind === 'tools' ? tool : prompt;
        if (added[kind]) entry.enable();
        else entry.disable();
    };
    follow('tools');
    follow('prompts');
    if (!follows) return;
    const stop = onListChange(follow);
    const closed = server.server.onclose;
    server.server.onclose = () => {
        stop();
        closed?.();
    };
}
