/**
 * POST /api/v1/chat/completions, composed from small steps:
 * read + validate → provider key → prepare (memory, retrieval, packing) → upstream → relay → persist.
 * Nothing reaches the upstream before validation and packing have passed.
 */
import type { Handler } from '../http/server.js'
import type { RequestFacts } from '../http/request-facts.js'
import { readJsonObject } from '../http/body.js'
import { sendJsonText } from '../http/respond.js'
import { gatewayError } from '../errors.js'
import { storeFailure } from '../http/store-failure.js'
import { utf8Header } from '../http/utf8-header.js'
import type { UpstreamClient } from '../upstream/client.js'
import { callUpstream, readCompletion } from './upstream-call.js'
import type { Bytes, ChatMessage, Clock, PromptTrace, Tenant, Tokens } from '../types.js'
import type { Cancel } from '../retrieval/embedder.js'
import { metadataJson, type Metadata } from './metadata.js'
import { relayStream, spliceMetadata, SSE_HEADERS, streamFailure, UPSTREAM_REPORTED_FAILURE, type StreamOutcome, type Usage } from './relay-stream.js'
import { messagesJsonOf, upstreamBody } from './upstream-body.js'
import { generationFailed, replyFromCompletion } from '../messages/reply.js'
import { validateChat, type ChatRequest, type ValidationLimits } from './validate.js'
import { namesFiles, resolveFileParts, type FileTexts } from './file-inputs.js'

export interface PreparedChat {
  messages: ChatMessage[]
  metadata: Metadata
  /** Our exact count of `messages` (what the packer counted), to learn from the upstream's usage. */
  countedTokens: Tokens
  /** What `save` needs to know of the plan (the new messages, and where a resent history diverged): the planner's. */
  saving?: unknown
  /** The retrieved excerpts that went into the prompt, with their text (the Responses API's `file_search_call`). */
  excerpts?: readonly { file_id: string; filename: string; metadata: Record<string, unknown> | null; score: number; text: string }[]
  /** How the prompt was packed, for the request's trace. */
  trace?: PromptTrace
}

/** The memory/retrieval/packing side of a chat, behind one seam so the relay knows nothing of storage. */
export interface ChatPlanner {
  /**
   * Synchronous when it can be (nothing to remember or retrieve, the model list cached): no await on the hot path.
   * `cancel.signal`: the client's departure, read only if something is to be cancelled (the request context).
   */
  prepare(tenant: Tenant, req: ChatRequest, authorization: string, cancel: Cancel): PreparedChat | Promise<PreparedChat>
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
  /** The caller's files, for a message part that names one by id (file-inputs.ts); without it such parts go as sent. */
  files?: NamedFiles
}

/** The caller's files and the model's window they must fit (file-inputs.ts). */
export interface NamedFiles {
  texts: FileTexts
  window(model: string, authorization: string, cancel: Cancel): Promise<Tokens>
}

export function chatHandler(o: ChatHandlerOptions): Handler {
  return async (ctx) => {
    const tenant = ctx.tenant
    if (tenant === undefined) throw gatewayError('missing_service_key')
    const body = await readJsonObject(ctx.req, o.limits.maxBodyBytes)
    const header = ctx.req.headers['x-session-id']
    let req = validateChat(body, o.limits, { sessionId: typeof header === 'string' ? utf8Header(header, 'x-session-id') : undefined })
    ctx.facts.model = req.model
    ctx.facts.stream = req.stream

    const authorization = ctx.req.headers.authorization
    if (authorization === undefined || authorization.trim() === '') throw gatewayError('missing_provider_key')
    if (o.files !== undefined && namesFiles(req.messages)) {
      const window = await o.files.window(req.model, authorization, ctx)
      req = { ...req, messages: await resolveFileParts(req.messages, o.files.texts, tenant.id, window) }
    }

    // The context's `signal` is a getter: the AbortSignal is only made if the planner reads it (see ClientGone).
    const planned = o.planner.prepare(tenant, req, authorization, ctx)
    const prepared = planned instanceof Promise ? await planned : planned
    ctx.trace = prepared.trace
    const shouldSave = req.sessionId !== undefined && req.saveToMemory

    let fields = req.passthrough
    if (req.stream && o.alwaysRequestUsage && !req.includeUsage) {
      const so = fields.stream_options
      const streamOptions = so && typeof so === 'object' ? { ...so, include_usage: true } : { include_usage: true }
      // Spreads (they define properties: a `__proto__` field stays a field), but never one followed by a key the object
      // lacks, which takes V8's slow path (≈ 0.4 µs hot, more in a cold request): the new key goes first instead.
      fields = Object.hasOwn(fields, 'stream_options') ? { ...fields, stream_options: streamOptions } : { stream_options: streamOptions, ...fields }
    }
    const sent = upstreamBody(fields, prepared.messages)
    if (prepared.trace !== undefined) prepared.trace.messagesJson = messagesJsonOf(sent)
    const call = await callUpstream(o.upstream, ctx, sent.json, {
      authorization,
      stream: req.stream,
      clock: o.clock,
      maxUpstreamBodyBytes: o.limits.maxUpstreamBodyBytes,
    })
    const { sentAt } = call

    if (req.stream && call.eventStream) {
      /** The token count calibration has been fed this stream's usage (see after the relay). */
      let learned = false
      // relayStream sends these with the first event, or on their own if the upstream has not sent one yet.
      ctx.res.writeHead(200, SSE_HEADERS)
      const outcome = await relayStream({
        upstream: call.response.body,
        res: ctx.res,
        client: ctx.clientGone,
        metadataJson: metadataJson(prepared.metadata),
        includeUsage: req.includeUsage,
        maxEventBytes: o.limits.maxEventBytes,
        saves: shouldSave,
        needsReply: shouldSave,
        onFirstToken: () => {
          ctx.facts.ttftMs = o.clock() - sentAt
        },
        onComplete: async (reply, usage) => {
          ctx.facts.upstreamMs = o.clock() - sentAt
          learned = true
          o.planner.observeUsage(req.model, prepared.countedTokens, usage)
          annotateUsage(ctx.facts, usage)
          if (shouldSave) await save(o.planner, tenant, req, prepared, reply)
        },
      })
      annotateOutcome(ctx.facts, outcome)
      // A failed stream's usage chunk is the upstream's count of the prompt all the same (a choice that finishes with
      // `error` is followed by one, as after any finish): learned from, as a JSON reply's is whatever its finish. Not
      // twice when the failure came after onComplete (a save that failed).
      if (outcome.kind === 'failed' && !learned) o.planner.observeUsage(req.model, prepared.countedTokens, outcome.usage)
      return
    }

    // Non-stream (or an upstream that answered a stream request with plain JSON).
    const { text, completion } = await readCompletion(call, { authorization, maxUpstreamBodyBytes: o.limits.maxUpstreamBodyBytes })
    ctx.facts.upstreamMs = o.clock() - sentAt
    const usage = completion.usage as Usage | undefined
    o.planner.observeUsage(req.model, prepared.countedTokens, usage)
    annotateUsage(ctx.facts, usage)
    // A client that left before its reply arrived did not complete the exchange: nothing is saved.
    if (ctx.clientGone.aborted) throw gatewayError('client_closed_request')
    const failed = generationFailed(completion)
    if (shouldSave && !failed) await save(o.planner, tenant, req, prepared, replyFromCompletion(completion))
    if (ctx.clientGone.aborted) throw gatewayError('client_closed_request')
    // Choice 0 failed while generating: the client gets the reply as it came, with its 200 (OpenRouter's answer, and
    // what the contract relays), but the exchange failed. Reported beside the 200 as a stream that failed after its
    // 200 is (request line, recallgate_stream_failures_total, trace), or it would pass for a success.
    if (failed) ctx.facts.streamFailure = UPSTREAM_REPORTED_FAILURE
    // The upstream's own text with `_metadata` spliced in, not `JSON.stringify({...completion, _metadata})`: the same
    // JSON value for any parser (a `_metadata` the upstream sent is overridden, as the last duplicate key), without
    // serialising the completion again. Profiled at 32 connections (bench/relay.ts): the stringify was 21 of the 754 µs
    // (profiler time) a request cost the gateway.
    sendJsonText(ctx.res, 200, spliceMetadata(text, metadataJson(prepared.metadata)))
  }
}

/** Save the exchange; a store that cannot take it is the API's storage error (also as the stream's last event). */
async function save(planner: ChatPlanner, tenant: Tenant, req: ChatRequest, prepared: PreparedChat, reply: ChatMessage): Promise<void> {
  try {
    await planner.save(tenant, req, prepared, reply)
  } catch (err) {
    throw storeFailure(err) ?? err
  }
}

/**
 * The status (200) is on the wire already when a stream ends: how it ended is reported beside it, in the request line
 * and in recallgate_stream_failures_total (observe/request-done.ts), or a failed stream would pass for a success.
 */
export function annotateOutcome(facts: RequestFacts, outcome: StreamOutcome): void {
  facts.streamFailure = streamFailure(outcome)
  // The tokens of a stream that failed after its usage chunk were spent all the same (a choice that finished with
  // `error` is followed by one): counted, as a JSON reply's are whatever its finish.
  if (outcome.kind === 'failed') annotateUsage(facts, outcome.usage)
}

export function annotateUsage(facts: RequestFacts, usage: Usage | undefined): void {
  if (usage === undefined) return
  if (typeof usage.prompt_tokens === 'number') facts.promptTokens = usage.prompt_tokens
  if (typeof usage.completion_tokens === 'number') facts.completionTokens = usage.completion_tokens
  const cached = usage.prompt_tokens_details?.cached_tokens
  if (typeof cached === 'number') facts.cachedTokens = cached
}
