/**
 * Structured text → chunks of about `chunkTokens` tokens (o200k), for retrieval.
 *
 * Units are sentences and lines inside paragraphs (a sentence longer than a quarter chunk is cut at word boundaries).
 * Units are packed greedily. A heading always starts a new chunk (the heading line opens it and its heading path goes
 * with every chunk under it); a paragraph boundary ends the chunk when it is at least half full, so short paragraphs
 * share a chunk but a chunk rarely straddles two long ones. When a chunk must break inside a paragraph, the next one
 * repeats its last sentences, up to `overlapTokens`, so a fact split across the break is whole in one of them.
 * Defaults for the sizes are chosen with bench/rag-eval.ts.
 */
import { encode } from 'gpt-tokenizer';
import { gatewayError } from '../errors.js';
const NO_SPECIAL = new Set();
/** Text containing `<|endoftext|>` is still just text here: count it, don't throw. */
export const countO200k = (text) => encode(text, { disallowedSpecial: NO_SPECIAL }).length;
// A sentence ends at . ! ? (or CJK ones) plus closing quotes/brackets, before whitespace; a line break always ends a unit.
const BOUNDARY = /[.!?。！？][)"'”’\]]*(?=\s)|\n/g;
export function chunkText(doc, opts) {
    const count = opts.countTokens ?? countO200k;
    const { chunkTokens, overlapTokens } = opts;
    if (!(chunkTokens >= 1) || !(overlapTokens >= 0) || overlapTokens >= chunkTokens)
        throw new RangeError(`chunkText: need 0 ≤ overlapTokens (${overlapTokens}) < chunkTokens (${chunkTokens})`);
    const minFill = (opts.minFill ?? 0.5) * chunkTokens;
    const pieceTokens = Math.max(8, Math.floor(chunkTokens / 4));
    const text = doc.text;
    const chunks = [];
    const emit = (units) => {
        const first = units[0];
        const last = units[units.length - 1];
        const body = text.slice(first.start, last.end);
        if (chunks.length >= opts.maxChunks)
            throw gatewayError('payload_too_large', {
                param: 'file',
                message: `The file makes more than ${opts.maxChunks} chunks of ${chunkTokens} tokens`,
            });
        chunks.push({ index: chunks.length, text: body, tokens: count(body), start: first.start, end: last.end, headingPath: [...last.path] });
    };
    let cur = [];
    let curTokens = 0;
    const add = (u) => {
        const last = cur[cur.length - 1];
        if (last !== undefined) {
            const onlyHeadings = cur.every((x) => x.heading);
            const newSection = u.heading && !onlyHeadings;
            const full = curTokens + u.tokens > chunkTokens;
            const paraBreak = u.para !== last.para && curTokens >= minFill;
            if (newSection || full || paraBreak) {
                emit(cur);
                // Overlap only inside a paragraph that continues: across a boundary the next chunk starts clean.
                const carried = [];
                let carriedTokens = 0;
                if (!newSection && !paraBreak && u.para === last.para) {
                    for (let i = cur.length - 1; i >= 0; i--) {
                        const c = cur[i];
                        if (c.para !== u.para || carriedTokens + c.tokens > overlapTokens)
                            break;
                        if (carriedTokens + c.tokens + u.tokens > chunkTokens)
                            break;
                        carried.unshift(c);
                        carriedTokens += c.tokens;
                    }
                }
                cur = carried;
                curTokens = carriedTokens;
            }
        }
        cur.push(u);
        curTokens += u.tokens;
    };
    const stack = [];
    let path = [];
    let para = 0;
    for (const b of doc.blocks) {
        para++;
        if (b.kind === 'heading') {
            while (stack.length > 0 && stack[stack.length - 1].level >= b.level)
                stack.pop();
            stack.push({ level: b.level, title: b.title });
            path = stack.map((h) => h.title);
            add({ start: b.start, end: b.end, tokens: count(text.slice(b.start, b.end)), para, heading: true, path });
            continue;
        }
        for (const [s, e] of sentences(text, b.start, b.end)) {
            const tokens = count(text.slice(s, e));
            if (tokens <= pieceTokens * 2)
                add({ start: s, end: e, tokens, para, heading: false, path });
            else
                for (const [ps, pe, pt] of pieces(text, s, e, tokens, pieceTokens, count))
                    add({ start: ps, end: pe, tokens: pt, para, heading: false, path });
        }
    }
    if (cur.length > 0)
        emit(cur);
    return chunks;
}
/** Sentence and line ranges in text[from, to), trimmed, empty ones dropped. */
function sentences(text, from, to) {
    const out = [];
    const push = (s, e) => {
        while (s < e && isSpace(text.charCodeAt(s)))
            s++;
        while (e > s && isSpace(text.charCodeAt(e - 1)))
            e--;
        if (e > s)
            out.push([s, e]);
    };
    BOUNDARY.lastIndex = from;
    let start = from;
    for (;;) {
        const m = BOUNDARY.exec(text);
        if (m === null || m.index >= to)
            break;
        const end = m[0] === '\n' ? m.index : m.index + m[0].length;
        push(start, Math.min(end, to));
        start = m.index + m[0].length;
        BOUNDARY.lastIndex = start;
    }
    push(start, to);
    return out;
}
/** Cut a long sentence into pieces of about `target` tokens at whitespace (or anywhere, for unbroken text). */
function pieces(text, from, to, tokens, target, count) {
    const out = [];
    const charsPerPiece = Math.max(1, Math.floor(((to - from) * target) / tokens));
    let s = from;
    while (s < to) {
        let e = Math.min(to, s + charsPerPiece);
        if (e < to) {
            const space = text.lastIndexOf(' ', e);
            if (space > s + charsPerPiece / 2)
                e = space;
        }
        // Never split a UTF-16 surrogate pair.
        const c = text.charCodeAt(e - 1);
        if (e < to && c >= 0xd800 && c <= 0xdbff)
            e++;
        let ps = s;
        while (ps < e && isSpace(text.charCodeAt(ps)))
            ps++;
        if (e > ps)
            out.push([ps, e, count(text.slice(ps, e))]);
        s = e;
    }
    return out;
}
function isSpace(c) {
    return c === 32 || c === 10 || c === 9 || c === 13 || c === 12 || c === 0xa0;
}
//# sourceMappingURL=chunker.js.map