import { pack } from '../context/packer.js';
import { renderContextMessage } from '../rag/knowledge-base.js';
/** Leading system messages stay first; everything from the first non-system message on keeps its order. */
export function splitRequest(messages) {
    let i = 0;
    while (i < messages.length && messages[i]?.role === 'system')
        i++;
    return { system: messages.slice(0, i), other: messages.slice(i) };
}
/** The retrieval query: `ragQuery`, else the last user message. */
export function retrievalQuery(req) {
    if (req.ragQuery !== undefined)
        return req.ragQuery;
    for (let i = req.messages.length - 1; i >= 0; i--) {
        const m = req.messages[i];
        if (m?.role === 'user' && m.content.trim() !== '')
            return m.content;
    }
    return undefined;
}
export class Planner {
    #o;
    constructor(o) {
        this.#o = o;
    }
    async prepare(tenant, req, opts) {
        const o = this.#o;
        const window = (await o.catalog.contextLength(req.model, opts.authorization)) ?? o.defaultContextLength;
        const usable = o.counter.usableWindow(req.model, window);
        const reserve = req.maxTokens ?? Math.min(o.defaultMaxTokens, Math.floor(usable / 4));
        const { system, other } = splitRequest(req.messages);
        const history = req.sessionId === undefined ? [] : o.sessions.history(tenant.id, req.sessionId, o.maxHistoryMessages);
        const query = req.useRAG ? retrievalQuery(req) : undefined;
        let hits = [];
        if (query !== undefined)
            hits = await o.knowledge.search(tenant.id, query, o.ragTopK);
        const model = req.model;
        const result = pack({
            window: usable,
            reserve,
            requestSystem: system,
            requestOther: other,
            history,
            maxHistoryMessages: o.maxHistoryMessages,
            retrieval: hits.length === 0
                ? undefined
                : {
                    candidates: hits,
                    budget: Math.min(o.ragMaxTokens, Math.floor(usable * o.ragBudgetShare)),
                    render: (selected) => renderContextMessage(selected.map((i) => hits[i])),
                },
            messageTokens: (m) => o.counter.messageTokens(m, model),
            historyMessageTokens: (m) => o.counter.messageTokensFromContent(m.role, m.tokens, model),
            chatOverhead: o.counter.chatOverhead(model),
        });
        const usedHits = result.selectedChunks.map((i) => hits[i]);
        const metadata = {
            memory: { sessionId: req.sessionId ?? null, historyMessages: result.includedHistory, recalledMessages: 0 },
            rag: {
                enabled: req.useRAG,
                resultsFound: hits.length,
                query: query ?? null,
                sources: usedHits.map((h) => ({
                    file_id: h.file_id,
                    filename: h.filename,
                    chunk_index: h.chunk_index,
                    score: h.score,
                })),
            },
            context: {
                totalTokens: result.totalTokens,
                includedMessages: req.messages.length + result.includedHistory,
                includedChunks: result.includedChunks,
                truncated: result.truncated,
                window: usable,
                reserved: reserve,
            },
        };
        return { messages: result.messages, metadata, countedTokens: result.totalTokens };
    }
    async save(tenant, req, reply) {
        if (req.sessionId === undefined)
            return;
        const toSave = req.messages.filter((m) => m.role !== 'system');
        toSave.push({ role: 'assistant', content: reply });
        await this.#o.sessions.appendExchange(tenant.id, req.sessionId, toSave);
    }
    observeUsage(model, counted, usage) {
        const reported = usage?.prompt_tokens;
        if (typeof reported === 'number' && reported > 0 && counted > 0)
            this.#o.counter.observe(model, counted, reported);
    }
}
//# sourceMappingURL=planner.js.map