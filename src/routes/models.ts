/** GET /api/v1/models: the upstream's list, relayed from the catalog's short-lived cache. */
import type { Handler } from '../http/server.js'
import type { ModelCatalog } from '../upstream/model-catalog.js'

export function modelsHandler(catalog: ModelCatalog): Handler {
  return async (ctx) => {
    const body = await catalog.list(ctx.req.headers.authorization)
    ctx.res.statusCode = 200
    ctx.res.setHeader('content-type', 'application/json; charset=utf-8')
    ctx.res.setHeader('content-length', Buffer.byteLength(body))
    ctx.res.end(body)
  }
}
