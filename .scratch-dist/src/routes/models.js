export function modelsHandler(catalog) {
    return async (ctx) => {
        const body = await catalog.list(ctx.req.headers.authorization);
        ctx.res.statusCode = 200;
        ctx.res.setHeader('content-type', 'application/json; charset=utf-8');
        ctx.res.setHeader('content-length', Buffer.byteLength(body));
        ctx.res.end(body);
    };
}
//# sourceMappingURL=models.js.map