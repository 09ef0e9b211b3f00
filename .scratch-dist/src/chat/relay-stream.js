/**
 * Relays an upstream SSE stream to the client event by event while capturing the assistant's text.
 *
 * - Each upstream network chunk is parsed incrementally and what it completes is written to the client in one write,
 *   at once; when the client's socket buffer is full (`write()` false) we stop reading the upstream until `drain`.
 * - The first content chunk carries `_metadata`. Keep-alive comments stay comments. The usage-only chunk
 *   (`choices: []`) is captured and forwarded only if the client asked for `include_usage`.
 * - An upstream error event is relayed as is; our own failures mid-stream (invalid SSE, timeout, reset) become one
 *   error event in the OpenAI shape. Either way the stream then ends without `[DONE]`, which OpenAI clients read as
 *   an error, and nothing is saved.
 * - `[DONE]` is held back until `onComplete` (the memory save) has resolved, so a client that saw `[DONE]` knows the
 *   exchange is durable.
 */
import { once } from 'node:events';
import { asGatewayError, gatewayError, toWire } from '../errors.js';
import { transportError } from '../upstream/errors.js';
import { SseEventTooLargeError, SseParser } from '../upstream/sse-parser.js';
export const SSE_HEADERS = {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    // Tell nginx-style proxies in front of us not to buffer the stream.
    'x-accel-buffering': 'no',
};
export async function relayStream(o) {
    const { res } = o;
    const textParts = [];
    let usage;
    let metadataSent = false;
    let done = false;
    let upstreamError = false;
    let out = '';
    const parser = new SseParser({
        maxEventBytes: o.maxEventBytes,
        onComment: (text) => {
            out += `: ${text}\n\n`;
        },
        onEvent: (e) => {
            if (done)
                return;
            if (e.data === '[DONE]') {
                done = true;
                return;
            }
            let chunk;
            try {
                chunk = JSON.parse(e.data);
            }
            catch (err) {
                throw gatewayError('upstream_invalid_response', { message: 'The upstream sent an SSE event that is not JSON', cause: err });
            }
            if (chunk === null || typeof chunk !== 'object') {
                throw gatewayError('upstream_invalid_response', { message: 'The upstream sent an SSE event that is not an object' });
            }
            if (chunk.error !== undefined) {
                upstreamError = true;
                out += `data: ${e.data}\n\n`;
                return;
            }
            const choices = chunk.choices;
            if (Array.isArray(choices) && choices.length === 0) {
                if (chunk.usage)
                    usage = chunk.usage;
                if (o.includeUsage)
                    out += `data: ${e.data}\n\n`;
                return;
            }
            if (chunk.usage)
                usage = chunk.usage;
            const content = choices?.[0]?.delta?.content;
            if (typeof content === 'string' && content !== '') {
                if (textParts.length === 0)
                    o.onFirstToken?.();
                textParts.push(content);
            }
            if (!metadataSent) {
                metadataSent = true;
                out += `data: ${spliceMetadata(e.data, o.metadataJson)}\n\n`;
            }
            else {
                out += `data: ${e.data}\n\n`;
            }
        },
    });
    const flush = async () => {
        if (out === '')
            return;
        const ok = res.write(out);
        out = '';
        if (!ok && !res.destroyed)
            await once(res, 'drain', { signal: o.signal });
    };
    const fail = async (error) => {
        o.upstream.destroy();
        if (error !== undefined && !res.destroyed)
            out += `data: ${JSON.stringify(toWire(error))}\n\n`;
        if (!res.destroyed) {
            // A client that stops reading while we report the failure must not hold the request open.
            await flush().catch(() => undefined);
            res.end();
        }
        return { kind: 'failed', error, text: textParts.join(''), usage };
    };
    try {
        for await (const chunk of o.upstream) {
            parser.push(chunk);
            await flush();
            if (done || upstreamError)
                break;
        }
    }
    catch (err) {
        if (o.signal.aborted) {
            o.upstream.destroy();
            return { kind: 'aborted' };
        }
        if (err instanceof SseEventTooLargeError) {
            return fail(gatewayError('upstream_invalid_response', { message: err.message, cause: err }));
        }
        return fail(isGatewayError(err) ? err : transportError(err));
    }
    if (o.signal.aborted)
        return { kind: 'aborted' };
    if (upstreamError)
        return fail(undefined);
    if (!done) {
        return fail(gatewayError('upstream_invalid_response', { message: 'The upstream stream ended before [DONE]' }));
    }
    o.upstream.destroy();
    const text = textParts.join('');
    try {
        await o.onComplete(text, usage);
    }
    catch (err) {
        return fail(asGatewayError(err));
    }
    if (o.signal.aborted)
        return { kind: 'aborted' };
    res.end('data: [DONE]\n\n');
    return { kind: 'completed', text, usage };
}
function isGatewayError(err) {
    return err instanceof Error && err.name === 'GatewayError';
}
/** Add `_metadata` to a chunk's JSON without re-serialising it: `{...}` → `{...,"_metadata":{...}}`. */
function spliceMetadata(data, metadataJson) {
    const end = data.lastIndexOf('}');
    if (end === -1)
        return data;
    const body = data.slice(0, end).trimEnd();
    const sep = body.endsWith('{') ? '' : ',';
    return `${body}${sep}"_metadata":${metadataJson}}`;
}
//# sourceMappingURL=relay-stream.js.map