/**
 * Validation of a chat completion body. Every field the contract names is checked and a failure names it in `param`
 * (`messages[2].content`). What passes becomes a `ChatRequest`; everything else in the body is kept verbatim in
 * `passthrough` for the upstream, minus the four gateway extensions, which never leave the gateway.
 */
import { invalidParam, gatewayError } from '../errors.js';
const EXTENSIONS = ['sessionId', 'saveToMemory', 'useRAG', 'ragQuery'];
const ROLES = new Set(['system', 'user', 'assistant']);
// `vendor/model`, where the model part may itself contain slashes, dots, colons (`:free`, `:nitro`) and the like.
const MODEL_RE = /^[A-Za-z0-9][\w.-]*\/[^\s/][^\s]*$/;
export function validateChat(body, limits) {
    const model = body.model;
    if (model === undefined)
        throw gatewayError('missing_parameter', { param: 'model', message: 'model is required' });
    if (typeof model !== 'string' || !MODEL_RE.test(model) || model.length > 256) {
        throw invalidParam('model', 'model must be a string of the form <vendor>/<model_name>, e.g. openai/gpt-4o');
    }
    const messages = validateMessages(body.messages, limits.maxMessages);
    const stream = optionalBoolean(body, 'stream') ?? false;
    const saveToMemory = optionalBoolean(body, 'saveToMemory') ?? true;
    const useRAG = optionalBoolean(body, 'useRAG') ?? true;
    const temperature = body.temperature;
    if (temperature !== undefined && temperature !== null && !inRange(temperature, 0, 2)) {
        throw invalidParam('temperature', 'temperature must be a number from 0 to 2');
    }
    const topP = body.top_p;
    if (topP !== undefined && topP !== null && !inRange(topP, 0, 1)) {
        throw invalidParam('top_p', 'top_p must be a number from 0 to 1');
    }
    const maxTokensRaw = body.max_tokens;
    let maxTokens;
    if (maxTokensRaw !== undefined && maxTokensRaw !== null) {
        if (typeof maxTokensRaw !== 'number' || !Number.isSafeInteger(maxTokensRaw) || maxTokensRaw < 1) {
            throw invalidParam('max_tokens', 'max_tokens must be a positive integer');
        }
        maxTokens = maxTokensRaw;
    }
    const sessionIdRaw = body.sessionId;
    let sessionId;
    if (sessionIdRaw !== undefined && sessionIdRaw !== null) {
        if (typeof sessionIdRaw !== 'string' || sessionIdRaw === '') {
            throw invalidParam('sessionId', 'sessionId must be a non-empty string');
        }
        if (sessionIdRaw.length > limits.maxSessionIdLength) {
            throw invalidParam('sessionId', `sessionId must be at most ${limits.maxSessionIdLength} characters`);
        }
        if (hasLoneSurrogate(sessionIdRaw))
            throw invalidParam('sessionId', 'sessionId must be valid Unicode');
        sessionId = sessionIdRaw;
    }
    const ragQueryRaw = body.ragQuery;
    let ragQuery;
    if (ragQueryRaw !== undefined && ragQueryRaw !== null) {
        if (typeof ragQueryRaw !== 'string')
            throw invalidParam('ragQuery', 'ragQuery must be a string');
        ragQuery = ragQueryRaw === '' ? undefined : ragQueryRaw;
    }
    const streamOptions = body.stream_options;
    if (streamOptions !== undefined && streamOptions !== null && (typeof streamOptions !== 'object' || Array.isArray(streamOptions))) {
        throw invalidParam('stream_options', 'stream_options must be an object');
    }
    const includeUsage = streamOptions?.include_usage === true;
    const passthrough = {};
    for (const [k, v] of Object.entries(body))
        passthrough[k] = v;
    for (const k of EXTENSIONS)
        delete passthrough[k];
    return { model, messages, stream, maxTokens, sessionId, saveToMemory, useRAG, ragQuery, includeUsage, passthrough };
}
function validateMessages(raw, max) {
    if (raw === undefined)
        throw gatewayError('missing_parameter', { param: 'messages', message: 'messages is required' });
    if (!Array.isArray(raw))
        throw invalidParam('messages', 'messages must be an array');
    if (raw.length === 0)
        throw invalidParam('messages', 'messages must contain at least one message');
    if (raw.length > max)
        throw invalidParam('messages', `messages may contain at most ${max} messages`);
    const out = new Array(raw.length);
    for (let i = 0; i < raw.length; i++) {
        const m = raw[i];
        if (m === null || typeof m !== 'object' || Array.isArray(m)) {
            throw invalidParam(`messages[${i}]`, `messages[${i}] must be an object with role and content`);
        }
        const { role, content } = m;
        if (typeof role !== 'string' || !ROLES.has(role)) {
            throw invalidParam(`messages[${i}].role`, `messages[${i}].role must be one of system, user, assistant`);
        }
        if (typeof content !== 'string') {
            throw invalidParam(`messages[${i}].content`, `messages[${i}].content must be a string`);
        }
        out[i] = { role: role, content };
    }
    return out;
}
function optionalBoolean(body, field) {
    const v = body[field];
    if (v === undefined || v === null)
        return undefined;
    if (typeof v !== 'boolean')
        throw invalidParam(field, `${field} must be a boolean`);
    return v;
}
function inRange(v, lo, hi) {
    return typeof v === 'number' && Number.isFinite(v) && v >= lo && v <= hi;
}
function hasLoneSurrogate(s) {
    return /\p{Surrogate}/u.test(s);
}
//# sourceMappingURL=validate.js.map