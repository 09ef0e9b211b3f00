import { sendJson } from '../http/respond.js';
export function healthHandler() {
    return async (ctx) => {
        sendJson(ctx.res, 200, { status: 'ok' });
    };
}
//# sourceMappingURL=health.js.map