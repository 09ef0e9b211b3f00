import { gatewayError } from '../errors.js';
export async function readBody(req, limit) {
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > limit) {
        throw gatewayError('payload_too_large', { message: `Request body exceeds ${limit} bytes` });
    }
    const parts = [];
    let size = 0;
    for await (const chunk of req) {
        const buf = chunk;
        size += buf.length;
        if (size > limit) {
            throw gatewayError('payload_too_large', { message: `Request body exceeds ${limit} bytes` });
        }
        parts.push(buf);
    }
    return parts.length === 1 ? parts[0] : Buffer.concat(parts, size);
}
/** The media type of a request, lower-cased, without parameters (`application/json; charset=utf-8` → `application/json`). */
export function mediaType(req) {
    const ct = req.headers['content-type'];
    if (ct === undefined)
        return undefined;
    return ct.split(';', 1)[0]?.trim().toLowerCase();
}
export function requireJson(req) {
    const type = mediaType(req);
    if (type !== 'application/json' && !(type?.startsWith('application/') && type.endsWith('+json'))) {
        throw gatewayError('unsupported_media_type', {
            message: `Content-Type must be application/json, got ${type ?? 'none'}`,
        });
    }
}
/** Read and parse a JSON object body. Anything but a JSON object is a 400 naming the body. */
export async function readJsonObject(req, limit) {
    requireJson(req);
    const raw = await readBody(req, limit);
    let value;
    try {
        value = JSON.parse(raw.toString('utf8'));
    }
    catch (err) {
        throw gatewayError('invalid_json', { message: `Request body is not valid JSON: ${err.message}` });
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
        throw gatewayError('invalid_json', { message: 'Request body must be a JSON object' });
    }
    return value;
}
//# sourceMappingURL=body.js.map