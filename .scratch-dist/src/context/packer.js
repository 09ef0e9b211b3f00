/**
 * Context packing: choose what goes upstream within the model's window, with exact token counts. Pure: no I/O, no
 * tokenizer of its own — every count comes from the callbacks (TokenCounter for the model), and history is counted
 * from the content tokens stored with each message, so packing a 1,000-message session tokenizes nothing but the
 * rendered retrieval block.
 *
 * Priority, each step filling what the previous left:
 *   1. the request's own messages and the reply reserve (must fit, else 400 context_length_exceeded);
 *   2. retrieved chunks, best first, within their budget;
 *   3. history, newest first, whole user/assistant pairs, up to maxHistoryMessages;
 *      (3b. when the history does not fit and `recall` is given: part of its room for recalled older turns.)
 * Order sent: request system, retrieved context, recalled turns, history oldest first, request others.
 *
 * Exactness: the chat encodings frame every message independently, so a chat's count is chatOverhead plus the sum of
 * its messages' counts; `totalTokens` is that sum for exactly the messages returned.
 */
import { gatewayError } from '../errors.js';
export function pack(input) {
    const { window, reserve, messageTokens } = input;
    const requestTokens = input.chatOverhead + sum(input.requestSystem, messageTokens) + sum(input.requestOther, messageTokens);
    if (requestTokens + reserve > window) {
        throw gatewayError('context_length_exceeded', {
            param: 'messages',
            message: `This model's context window allows ${window} tokens, but the request's messages take ${requestTokens} ` +
                `and ${reserve} are reserved for the reply (max_tokens): ${requestTokens + reserve} in total. ` +
                'Shorten the messages or lower max_tokens.',
        });
    }
    let room = window - reserve - requestTokens;
    let truncated = false;
    const chunks = input.retrieval === undefined ? undefined : selectChunks(input.retrieval, room, messageTokens);
    room -= chunks?.tokens ?? 0;
    truncated ||= (chunks?.selected.length ?? 0) < (input.retrieval?.candidates.length ?? 0);
    const limit = Math.max(0, Math.floor(input.maxHistoryMessages));
    let recent = newestFirst(input.history, room, limit, input.historyMessageTokens);
    let recalled;
    if (recent.cut) {
        truncated = true;
        if (input.recall !== undefined) {
            const share = Math.min(1, Math.max(0, input.recall.recentShare));
            const split = newestFirst(input.history, Math.floor(room * share), limit, input.historyMessageTokens);
            recalled = selectRecall(input.recall, input.history, split, room - split.tokens, messageTokens);
            // Nothing recalled: the newest turns keep the whole room rather than leave it empty.
            if (recalled !== undefined)
                recent = split;
        }
    }
    const messages = [...input.requestSystem];
    if (chunks !== undefined)
        messages.push(chunks.message);
    if (recalled !== undefined)
        messages.push(recalled.message);
    for (let i = recent.start; i < input.history.length; i++) {
        const m = input.history[i];
        if (m !== undefined)
            messages.push({ role: m.role, content: m.content });
    }
    messages.push(...input.requestOther);
    return {
        messages,
        totalTokens: requestTokens + (chunks?.tokens ?? 0) + (recalled?.tokens ?? 0) + recent.tokens,
        includedHistory: input.history.length - recent.start,
        includedChunks: chunks?.selected.length ?? 0,
        selectedChunks: chunks?.selected ?? [],
        recalledMessages: recalled?.messages ?? 0,
        truncated,
    };
}
/**
 * Best-first greedy selection by content tokens (a lower bound of the rendered size), then an exact count of the
 * rendered message; while it is over budget, the lowest-ranked chunks covering the overshoot are dropped. A chunk too
 * large for what is left is skipped, so a smaller, lower-ranked one can still use the room.
 */
function selectChunks(r, room, messageTokens) {
    const budget = Math.min(r.budget, room);
    const selected = [];
    let estimate = 0;
    for (const [i, c] of r.candidates.entries()) {
        if (estimate + c.tokens <= budget) {
            selected.push(i);
            estimate += c.tokens;
        }
    }
    while (selected.length > 0) {
        const message = r.render(selected);
        const tokens = messageTokens(message);
        if (tokens <= budget)
            return { message, tokens, selected };
        let over = tokens - budget;
        do {
            over -= r.candidates[selected.pop() ?? 0]?.tokens ?? 0;
        } while (over > 0 && selected.length > 0);
    }
    return undefined;
}
/**
 * The longest suffix of whole units that fits `room` and `limit`. A unit is a user message with the assistant reply
 * that follows it, or a lone message. Assistant turns whose user turn is not included (its question was pruned, or
 * the conversation opened with a greeting) are not sent as the first history messages: they would answer nothing,
 * and some providers reject a conversation whose first non-system turn is the assistant's.
 */
function newestFirst(history, room, limit, tokensOf) {
    let start = history.length;
    let tokens = 0;
    let cut = false;
    while (start > 0) {
        const last = history[start - 1];
        if (last === undefined)
            break;
        let unitStart = start - 1;
        let unitTokens = tokensOf(last);
        const before = history[start - 2];
        if (last.role === 'assistant' && before?.role === 'user') {
            unitStart--;
            unitTokens += tokensOf(before);
        }
        if (history.length - unitStart > limit || tokens + unitTokens > room) {
            // Only a loss if something sendable was left: a prefix of lone assistant turns would be dropped anyway.
            cut = history.slice(0, start).some((m) => m.role === 'user');
            break;
        }
        tokens += unitTokens;
        start = unitStart;
    }
    for (let first = history[start]; first?.role === 'assistant'; first = history[++start])
        tokens -= tokensOf(first);
    return { start, tokens, cut };
}
function selectRecall(recall, history, recent, room, messageTokens) {
    if (room <= 0)
        return undefined;
    const seqs = new Set();
    for (let i = recent.start; i < history.length; i++) {
        const m = history[i];
        if (m !== undefined)
            seqs.add(m.seq);
    }
    const picked = recall.select({ room, recent: seqs, oldestRecentSeq: history[recent.start]?.seq });
    if (picked === undefined || picked.messages <= 0)
        return undefined;
    const tokens = messageTokens(picked.message);
    return tokens <= room ? { ...picked, tokens } : undefined;
}
function sum(items, tokensOf) {
    let total = 0;
    for (const m of items)
        total += tokensOf(m);
    return total;
}
//# sourceMappingURL=packer.js.map