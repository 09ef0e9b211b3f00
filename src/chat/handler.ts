/**
 * POST /api/v1/chat/completions, composed from small steps:
 * read + validate → provider key → prepare (memory, retrieval, packing) → upstream → relay → persist.
 * Nothing reaches the upstream before validation and packing have passed.
 */
import type { Handler } from '../http/server.js'
import { readJsonObject } from '../http/body.js'
import { sendJsonText } from '../http/respond.js'
import { gatewayError } from '../errors.js'
import { readUpstreamBody, type UpstreamClient } from '../upstream/client.js'
import { upstreamHttpError } from '../upstream/errors.js'
import type { Bytes, ChatMessage, Clock, Tenant, Tokens } from '../types.js'
import type { Metadata } from './metadata.js'
import { relayStream, spliceMetadata, SSE_HEADERS, streamFailure, type Usage } from './relay-stream.js'
import { upstreamBodyJson } from './upstream-body.js'
import { replyFromCompletion } from '../messages/reply.js'
import { validateChat, type ChatRequest, type ValidationLimits } from './validate.js'

export interface PreparedChat {
  messages: ChatMessage[]
  metadata: Metadata
  /** Our exact count of `messages` (what the packer counted), to learn from the upstream's usage. */
  countedTokens: Tokens
  /** What `save` needs to know of the plan (the new messages, and where a resent history diverged): the planner's. */
  saving?: unknown
}

/** The memory/retrieval/packing side of a chat, behind one seam so the relay knows nothing of storage. */
export interface ChatPlanner {
  prepare(tenant: Tenant, req: ChatRequest, opts: { authorization: string; signal: AbortSignal }): Promise<PreparedChat>
  /**
   * Persist a completed exchange (the assistant's message as the client sees it); resolves once durable. Called only
   * when the exchange completed.
   */
  save(tenant: Tenant, req: ChatRequest, prepared: PreparedChat, reply: ChatMessage): Promise<void>
  /** The upstream reported its own prompt token count. */
  observeUsage(model: string, counted: Tokens, usage: Usage | undefined): void
}

export interface ChatHandlerOptions {
  upstream: UpstreamClient
  planner: ChatPlanner
  limits: ValidationLimits & { maxBodyBytes: Bytes; maxUpstreamBodyBytes: Bytes; maxEventBytes: Bytes }
  clock: Clock
  /** The gateway asks the upstream for the usage chunk even when the client did not, to learn token counts. */
  alwaysRequestUsage: boolean
}

export function chatHandler(o: ChatHandlerOptions): Handler {
  return async (ctx) => {
    const tenant = ctx.tenant
    if (tenant === undefined) throw gatewayError('missing_service_key')
    const body = await readJsonObject(ctx.req, o.limits.maxBodyBytes)
    const header = ctx.req.headers['x-session-id']
    const req = validateChat(body, o.limits, { sessionId: typeof header === 'string' ? header : undefined })
    ctx.annotations.model = req.model
    ctx.annotations.stream = req.stream

    const authorization = ctx.req.headers.authorization
    if (authorization === undefined || authorization.trim() === '') throw gatewayError('missing_provider_key')

    // `signal` as a getter: the AbortSignal is only made if the planner reads it (see ClientGone).
    const prepared = await o.planner.prepare(tenant, req, {
      authorization,
      get signal() {
        return ctx.signal
      },
    })
    const shouldSave = req.sessionId !== undefined && req.saveToMemory

    let fields = req.passthrough
    if (req.stream && o.alwaysRequestUsage && !req.includeUsage) {
      const so = fields.stream_options
      fields = { ...fields, stream_options: { ...(so && typeof so === 'object' ? so : {}), include_usage: true } }
    }
    const sentAt = o.clock()
    const upstream = await o.upstream.chat(upstreamBodyJson(fields, prepared.messages), {
      authorization,
      signal: ctx.clientGone,
      stream: req.stream,
    })
    ctx.annotations.upstreamHeadersMs = o.clock() - sentAt

    const ok = upstream.status >= 200 && upstream.status < 300
    const contentType = String(upstream.headers['content-type'] ?? '')
    if (!ok) {
      const text = withoutSecret(await readUpstreamBody(upstream.body, o.limits.maxUpstreamBodyBytes), authorization)
      const ra = upstream.headers['retry-after']
      throw upstreamHttpError(upstream.status, text, typeof ra === 'string' ? ra : undefined)
    }

    if (req.stream && contentType.includes('text/event-stream')) {
      // relayStream sends these with the first event, or on their own if the upstream has not sent one yet.
      ctx.res.writeHead(200, SSE_HEADERS)
      const outcome = await relayStream({
        upstream: upstream.body,
        res: ctx.res,
        client: ctx.clientGone,
        metadataJson: JSON.stringify(prepared.metadata),
        includeUsage: req.includeUsage,
        maxEventBytes: o.limits.maxEventBytes,
        onFirstToken: () => {
          ctx.annotations.ttftMs = o.clock() - sentAt
        },
        onComplete: async (reply, usage) => {
          ctx.annotations.upstreamMs = o.clock() - sentAt
          o.planner.observeUsage(req.model, prepared.countedTokens, usage)
          annotateUsage(ctx.annotations, usage)
          if (shouldSave) await o.planner.save(tenant, req, prepared, reply)
        },
      })
      // The status (200) is on the wire already: how the stream ended is reported beside it, in the request line and
      // in recallgate_stream_failures_total (main.ts, onRequestDone), or a failed stream would pass for a success.
      ctx.annotations.outcome = outcome.kind
      const failure = streamFailure(outcome)
      if (failure !== undefined) {
        ctx.annotations.streamFailure = failure.reason
        ctx.annotations.streamError = failure.code
        ctx.annotations.streamErrorMessage = failure.message
      }
      return
    }

    // Non-stream (or an upstream that answered a stream request with plain JSON).
    const text = await readUpstreamBody(upstream.body, o.limits.maxUpstreamBodyBytes)
    ctx.annotations.upstreamMs = o.clock() - sentAt
    let completion: Record<string, unknown>
    try {
      const parsed: unknown = JSON.parse(text)
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object')
      completion = parsed as Record<string, unknown>
    } catch (err) {
      throw gatewayError('upstream_invalid_response', { message: 'The upstream response is not a JSON object', cause: err })
    }
    if (completion.error !== undefined && completion.choices === undefined) {
      // OpenRouter can answer 200 with an error body (e.g. a provider failure after routing): a 502 to the client.
      throw upstreamHttpError(upstream.status, withoutSecret(text, authorization))
    }
    const usage = completion.usage as Usage | undefined
    o.planner.observeUsage(req.model, prepared.countedTokens, usage)
    annotateUsage(ctx.annotations, usage)
    // A client that left before its reply arrived did not complete the exchange: nothing is saved.
    if (ctx.clientGone.aborted) throw gatewayError('client_closed_request')
    if (shouldSave) await o.planner.save(tenant, req, prepared, replyFromCompletion(completion))
    if (ctx.clientGone.aborted) throw gatewayError('client_closed_request')
    // The upstream's own text with `_metadata` spliced in, not `JSON.stringify({...completion, _metadata})`: the same
    // JSON value for any parser (a `_metadata` the upstream sent is overridden, as the last duplicate key), without
    // serialising the completion again. Profiled at 32 connections (bench/relay.ts): the stringify was 21 of the 754 µs
    // (profiler time) a request cost the gateway.
    sendJsonText(ctx.res, 200, spliceMetadata(text, JSON.stringify(prepared.metadata)))
  }
}

/**
 * Some providers quote the API key they were given in their error message ("Incorrect API key provided: sk-…"). Error
 * messages reach the logs (5xx) and the error registry, so the caller's key is cut out of the upstream's body first.
 */
function withoutSecret(text: string, authorization: string): string {
  const token = authorization.replace(/^\s*bearer\s+/i, '').trim()
  return token.length >= 8 ? text.split(token).join('[redacted]') : text
}

function annotateUsage(a: Record<string, string | number | boolean | undefined>, usage: Usage | undefined): void {
  if (usage === undefined) return
  a.promptTokens = usage.prompt_tokens
  a.completionTokens = usage.completion_tokens
  const cached = usage.prompt_tokens_details?.cached_tokens
  if (typeof cached === 'number') a.cachedTokens = cached
}
