/**
 * POST /api/v1/embeddings: relayed to the upstream's /embeddings, so an OpenAI embedding client (LangChain's
 * OpenAIEmbeddings, LlamaIndex's OpenAIEmbedding) works against the same base URL. Nothing is stored or packed: the
 * body is checked for the two fields every provider needs, bounded, and passed on; the caller's `Authorization` is
 * forwarded and never logged, and an upstream error is mapped as chat's are (its status and message, the key cut out).
 */
import { gatewayError, invalidParam } from '../errors.js'
import { readJsonObject } from '../http/body.js'
import { sendJsonText } from '../http/respond.js'
import type { Handler } from '../http/server.js'
import type { Bytes, Clock } from '../types.js'
import { readUpstreamBody, type UpstreamClient } from '../upstream/client.js'
import { upstreamHttpError, withoutSecret } from '../upstream/errors.js'

export interface EmbeddingsOptions {
  upstream: UpstreamClient
  clock: Clock
  maxBodyBytes: Bytes
  maxUpstreamBodyBytes: Bytes
}

export function embeddingsHandler(o: EmbeddingsOptions): Handler {
  return async (ctx) => {
    const body = await readJsonObject(ctx.req, o.maxBodyBytes)
    if (body.model === undefined) throw gatewayError('missing_parameter', { param: 'model', message: 'model is required' })
    if (typeof body.model !== 'string' || body.model === '') throw invalidParam('model', 'model must be a non-empty string')
    if (body.input === undefined) throw gatewayError('missing_parameter', { param: 'input', message: 'input is required' })
    if (typeof body.input !== 'string' && !Array.isArray(body.input)) {
      throw invalidParam('input', 'input must be a string, an array of strings, or an array of token arrays')
    }
    ctx.facts.model = body.model
    const authorization = ctx.req.headers.authorization
    if (authorization === undefined || authorization.trim() === '') throw gatewayError('missing_provider_key')

    const sentAt = o.clock()
    const res = await o.upstream.postJson('/embeddings', JSON.stringify(body), { authorization, signal: ctx.clientGone })
    ctx.facts.upstreamMs = o.clock() - sentAt
    const text = await readUpstreamBody(res.body, o.maxUpstreamBodyBytes)
    if (res.status < 200 || res.status > 299) {
      const ra = res.headers['retry-after']
      throw upstreamHttpError(res.status, withoutSecret(text, authorization), typeof ra === 'string' ? ra : undefined)
    }
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch (err) {
      throw gatewayError('upstream_invalid_response', { message: 'The upstream embeddings response is not valid JSON', cause: err })
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw gatewayError('upstream_invalid_response', { message: 'The upstream embeddings response is not a JSON object' })
    }
    // OpenRouter can answer 200 with an error body: a 502 to the client, as for chat.
    if ('error' in parsed && !('data' in parsed)) throw upstreamHttpError(res.status, withoutSecret(text, authorization))
    sendJsonText(ctx.res, 200, text)
  }
}
