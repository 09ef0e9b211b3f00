export class Router {
    #entries = [];
    add(method, template, handler) {
        this.#entries.push({ method, template, segments: template.split('/').slice(1), handler });
        return this;
    }
    find(method, pathname) {
        const parts = pathname.split('/').slice(1);
        const allow = [];
        let template;
        // Static routes are registered before parameterised ones that could shadow them (e.g. /files/search before
        // /files/:id), and the first registered match wins.
        for (const e of this.#entries) {
            const params = matchSegments(e.segments, parts);
            if (params === undefined)
                continue;
            if (e.method === method || (method === 'HEAD' && e.method === 'GET')) {
                return { kind: 'match', match: { handler: e.handler, template: e.template, params } };
            }
            template ??= e.template;
            allow.push(e.method);
        }
        if (template !== undefined)
            return { kind: 'method-not-allowed', allow, template };
        return { kind: 'not-found' };
    }
}
function matchSegments(pattern, parts) {
    if (pattern.length !== parts.length)
        return undefined;
    const params = {};
    for (let i = 0; i < pattern.length; i++) {
        const p = pattern[i];
        const v = parts[i];
        if (p.startsWith(':')) {
            if (v === '')
                return undefined;
            let decoded;
            try {
                decoded = decodeURIComponent(v);
            }
            catch {
                // A malformed escape cannot name any stored id, so the route does not match (404 rather than 500).
                return undefined;
            }
            params[p.slice(1)] = decoded;
        }
        else if (p !== v)
            return undefined;
    }
    return params;
}
//# sourceMappingURL=router.js.map