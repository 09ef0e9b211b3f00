export function metricsHandler(metrics) {
    return async (ctx) => {
        const { contentType, body } = await metrics.render();
        ctx.res.statusCode = 200;
        ctx.res.setHeader('content-type', contentType);
        ctx.res.end(body);
    };
}
//# sourceMappingURL=metrics.js.map