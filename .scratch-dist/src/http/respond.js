import { toWire } from '../errors.js';
export function sendJson(res, status, body, headers) {
    const text = JSON.stringify(body);
    res.statusCode = status;
    if (headers)
        for (const [k, v] of Object.entries(headers))
            res.setHeader(k, v);
    res.setHeader('content-type', 'application/json; charset=utf-8');
    res.setHeader('content-length', Buffer.byteLength(text));
    res.end(text);
}
export function sendError(res, err) {
    sendJson(res, err.status, toWire(err), err.headers);
}
//# sourceMappingURL=respond.js.map