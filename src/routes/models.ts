/**
 * GET /api/v1/models: the upstream's list, relayed from the catalog's short-lived cache; GET /api/v1/models/{id}: one
 * model's entry from the same cache (ids contain `/`: the Node SDK sends `openai%2Fgpt-4o`, which the router decodes;
 * the Python SDK sends `openai/gpt-4o` as it is, which reaches this handler as `/models/{vendor}/{name}`).
 */
import { gatewayError } from '../errors.js'
import { sendJsonText } from '../http/respond.js'
import type { Handler } from '../http/server.js'
import type { ModelCatalog } from '../upstream/model-catalog.js'

export function modelsHandler(catalog: ModelCatalog): Handler {
  return async (ctx) => {
    const body = await catalog.list(ctx.req.headers.authorization)
    sendJsonText(ctx.res, 200, body)
  }
}

export function modelHandler(catalog: ModelCatalog): Handler {
  return async (ctx) => {
    const { id: encoded, vendor, name } = ctx.params
    const id = encoded ?? (vendor !== undefined && name !== undefined ? `${vendor}/${name}` : '')
    const entry = await catalog.model(id, ctx.req.headers.authorization)
    // OpenAI answers an unknown model with 404 `model_not_found`, param `model`.
    if (entry === undefined) throw gatewayError('model_not_found', { message: `The model ${JSON.stringify(id)} does not exist`, param: 'model' })
    sendJsonText(ctx.res, 200, entry)
  }
}
