/**
 * POST /api/v1/responses: OpenAI's Responses API on any upstream model, bridged to the chat path. The request is
 * translated and its context rebuilt from the store by prepare-turn.ts (a `previous_response_id` chain, or a
 * conversation, which is a session), and from there it is a chat: the same planner (memory, retrieval, recall,
 * packing, `_metadata`), the same upstream call, the same relay (with the Responses event format instead of the
 * upstream's bytes). A stored response is durable before its last byte: an immediate follow-up can chain.
 */
import { isObject, unixSeconds } from '../types.js'
import { gatewayError } from '../errors.js'
import { sendJsonText } from '../http/respond.js'
import { storeFailure } from '../http/store-failure.js'
import type { Handler } from '../http/server.js'
import type { StoredResponse } from '../storage/interface.js'
import type { ChatMessage, Clock, Tenant, Tokens } from '../types.js'
import type { UpstreamClient } from '../upstream/client.js'
import { annotateOutcome, annotateUsage, type PreparedChat } from '../chat/handler.js'
import { metadataJson } from '../chat/metadata.js'
import { relayStream, SSE_HEADERS, type Usage } from '../chat/relay-stream.js'
import { callUpstream, readCompletion } from '../chat/upstream-call.js'
import { choiceFailedError } from '../upstream/errors.js'
import { messagesJsonOf, upstreamBody } from '../chat/upstream-body.js'
import type { ChatRequest } from '../chat/validate.js'
import { generationFailed, replyFromCompletion } from '../messages/reply.js'
import type { ResponseItem } from './items.js'
import {
  completionToOutput,
  mapUsage,
  outputJson,
  ResponseJson,
  statusFromFinish,
  type ResponseObjectInput,
  type ResponseState,
  type ResponseUsage,
} from './output.js'
import type { ResponsesRequest } from './request.js'
import { fileSearchItem } from './file-search.js'
import { newId, storedItems, turnMessages } from './state.js'
import { encodeEvent, encodeEvents, JsonText, ResponseStreamTranslator } from './stream-translator.js'
import { prepareTurn, type PrepareTurnOptions } from './prepare-turn.js'

export interface ResponsesHandlerOptions extends PrepareTurnOptions {
  upstream: UpstreamClient
  /** Stored token counts of a turn's messages (what a chained request's packing reads). */
  countStored: (m: ChatMessage) => Tokens
  clock: Clock
  /** Wall clock, epoch ms (created_at). */
  now: () => number
  limits: PrepareTurnOptions['limits'] & {
    maxUpstreamBodyBytes: number
    maxEventBytes: number
  }
}

export function responsesHandler(o: ResponsesHandlerOptions): Handler {
  return async (ctx) => {
    const { tenant, r, authorization, inputItems: input, inputMessages, chatReq, prepared } = await prepareTurn(o, ctx)
    ctx.trace = prepared.trace
    const id = newId('resp')
    const createdAt = o.now()
    const fields: Record<string, unknown> = { model: r.model, ...r.chatFields, stream: r.stream }
    if (r.stream) fields.stream_options = { include_usage: true }
    const sent = upstreamBody(fields, prepared.messages)
    if (prepared.trace !== undefined) prepared.trace.messagesJson = messagesJsonOf(sent)
    const upstreamCall = callUpstream(o.upstream, ctx, sent.json, {
      authorization,
      stream: r.stream,
      clock: o.clock,
      maxUpstreamBodyBytes: o.limits.maxUpstreamBodyBytes,
    })
    const fileSearch = r.fileSearch === undefined ? undefined : fileSearchItem(prepared, r.include, newId)
    const turn: Turn = { tenant, r, id, createdAt, inputItems: input, inputMessages, chatReq, prepared, fileSearch, metadataJson: metadataJson(prepared.metadata) }
    // A stream's opening events (two snapshots of the response) are made while the upstream works on the request,
    // not after it answers: off the time to first text.
    const opening = r.stream ? openStream(turn) : undefined
    const call = await upstreamCall

    if (opening !== undefined && call.eventStream) {
      const { translator } = opening
      let finished: ReturnType<ResponseStreamTranslator['finish']> | undefined
      /** The token count calibration has been fed this stream's usage (see after the relay). */
      let learned = false
      ctx.res.writeHead(200, SSE_HEADERS)
      const outcome = await relayStream({
        prefix: opening.text,
        upstream: call.response.body,
        res: ctx.res,
        client: ctx.clientGone,
        metadataJson: '',
        includeUsage: true,
        maxEventBytes: o.limits.maxEventBytes,
        saves: saves(turn),
        onFirstToken: () => {
          ctx.facts.ttftMs = o.clock() - call.sentAt
        },
        format: {
          chunk: (c) => encodeEvents(translator.push(c)),
          // A piece read without a parse carries only its text: with log probabilities asked for (they sit beside the
          // text, on the choice), every event is parsed, so that push() gets them.
          ...(r.chatFields.logprobs === true ? {} : { text: (piece: Parameters<typeof translator.pushText>[0]) => translator.pushText(piece) }),
          finishing: () => {
            finished = translator.finish()
            return encodeEvents(finished.events)
          },
          done: () => encodeEvent(translator.terminal()),
          failure: (err) => encodeEvents(translator.fail({ code: err.code, message: err.message })),
        },
        onComplete: async (reply, usage) => {
          ctx.facts.upstreamMs = o.clock() - call.sentAt
          learned = true
          o.planner.observeUsage(r.model, prepared.countedTokens, usage)
          annotateUsage(ctx.facts, usage)
          const f = finished
          if (f === undefined) throw new Error('the stream completed without finishing')
          turn.completedAt = o.now()
          if (!saves(turn)) return
          await persist(o, turn, reply, { status: f.status, output: f.output, usage: f.usage, incompleteDetails: f.incompleteDetails, completedAt: turn.completedAt })
        },
      })
      annotateOutcome(ctx.facts, outcome)
      // As on the chat path: a failed stream's usage is still the upstream's count of the prompt, learned from once.
      if (outcome.kind === 'failed' && !learned) o.planner.observeUsage(r.model, prepared.countedTokens, outcome.usage)
      return
    }

    const { completion } = await readCompletion(call, { authorization, maxUpstreamBodyBytes: o.limits.maxUpstreamBodyBytes })
    ctx.facts.upstreamMs = o.clock() - call.sentAt
    const usage = completion.usage as Usage | undefined
    o.planner.observeUsage(r.model, prepared.countedTokens, usage)
    annotateUsage(ctx.facts, usage)
    const mapped = completionToOutput(completion, { newId, customTools: r.customTools })
    const { status, incompleteDetails } = statusFromFinish(mapped.finishReason)
    if (status === 'failed' || generationFailed(completion)) {
      // OpenRouter's report of a failure while generating (choice 0 finished with `error`, or carries an `error` object
      // whatever its finish, as the chat path judges it): the 502 a 200 carrying an error gets, with the choice's
      // message when it has one (a stream's is the same error, in its `error` and `response.failed` events).
      const choice: unknown = Array.isArray(completion.choices) ? completion.choices[0] : undefined
      throw choiceFailedError(isObject(choice) ? choice : {})
    }
    const output = fileSearch === undefined ? mapped.output : [fileSearch, ...mapped.output]
    if (ctx.clientGone.aborted) throw gatewayError('client_closed_request')
    const done = { status, output, usage: mapUsage(usage), incompleteDetails, completedAt: o.now() }
    if (saves(turn)) {
      await persist(o, turn, replyFromCompletion(completion), done)
      if (ctx.clientGone.aborted) throw gatewayError('client_closed_request')
    }
    // The same text as JSON.stringify of the object with `_metadata` last, from the shape cached per echo (output.ts).
    const response = new ResponseJson(fixedFields(turn), turn.metadataJson)
    // Written out, not `{ ...done, error: null, completedAt }`: a spread followed by an overridden key took V8's slow
    // path here, ≈ 4 µs a request (the largest line of the handler's own time in the Responses bench's profile).
    const state: ResponseState = {
      status: done.status,
      output: done.output,
      usage: done.usage,
      error: null,
      incompleteDetails: done.incompleteDetails,
      completedAt: unixSeconds(done.completedAt),
    }
    sendJsonText(ctx.res, 200, response.render(state, outputJson(state.output)))
  }
}

/** The stream's translator, started: its opening events (`created`, `in_progress`, a file search's item) as text. */
function openStream(turn: Turn): { translator: ResponseStreamTranslator; text: string } {
  const json = new ResponseJson(fixedFields(turn), turn.metadataJson)
  const translator = new ResponseStreamTranslator({
    newId,
    customTools: turn.r.customTools,
    // completed_at as the JSON answer and the stored response have it: set once the reply is complete, else null.
    base: (status, output, usage, error, incompleteDetails, outputJson) =>
      new JsonText(
        json.render(
          {
            status,
            output,
            usage,
            error,
            incompleteDetails,
            completedAt: turn.completedAt !== undefined && status !== 'failed' ? unixSeconds(turn.completedAt) : null,
          },
          outputJson,
        ),
      ),
    ...(turn.fileSearch === undefined ? {} : { leading: [turn.fileSearch] }),
  })
  return { translator, text: encodeEvents(translator.start()) }
}

interface Turn {
  tenant: Tenant
  r: ResponsesRequest
  id: string
  createdAt: number
  /** The input items with references resolved (what `input_items` lists). */
  inputItems: ResponseItem[]
  /** The same, as chat messages (instructions excluded). */
  inputMessages: ChatMessage[]
  chatReq: ChatRequest
  prepared: PreparedChat
  fileSearch: ResponseItem | undefined
  /** `_metadata`, as JSON: the last field of every Response object this turn sends. */
  metadataJson: string
  /** When the upstream's reply was complete (epoch ms); the stream's terminal event shows it. */
  completedAt?: number
}

interface Finished {
  status: string
  output: readonly ResponseItem[]
  usage: ResponseUsage
  incompleteDetails: { reason: string } | null
  /** Epoch ms: what the stored response and the answer both say. */
  completedAt: number
}

/**
 * The completed turn, durable before the client's last byte: the conversation's (session's) messages through the
 * planner, as a chat with a session saves them; the stored response (unless `store: false`), so that it can be
 * retrieved and chained at once.
 */
async function persist(o: ResponsesHandlerOptions, t: Turn, reply: ChatMessage, f: Finished): Promise<void> {
  try {
    await persistTurn(o, t, reply, f)
  } catch (err) {
    // A store that cannot take the turn is the API's storage error (also as the stream's last events).
    throw storeFailure(err) ?? err
  }
}

/** Whether persist has anything to save. */
function saves(t: Turn): boolean {
  return t.r.store || savesToSession(t.chatReq)
}

/** The turn goes into the conversation's (session's) messages: what persistTurn saves besides the stored response. */
function savesToSession(req: ChatRequest): boolean {
  return req.sessionId !== undefined && req.saveToMemory
}

async function persistTurn(o: ResponsesHandlerOptions, t: Turn, reply: ChatMessage, f: Finished): Promise<void> {
  if (savesToSession(t.chatReq)) await o.planner.save(t.tenant, t.chatReq, t.prepared, reply)
  if (!t.r.store) return
  const record: StoredResponse = {
    id: t.id,
    createdAt: t.createdAt,
    completedAt: f.completedAt,
    model: t.r.model,
    status: f.status,
    previousResponseId: t.r.previousResponseId ?? null,
    conversationId: t.r.conversationId ?? null,
    input: storedItems(t.inputItems),
    output: storedItems(f.output),
    messages: turnMessages([...t.inputMessages, reply], o.countStored),
    usage: f.usage as unknown as Record<string, unknown>,
    error: null,
    incompleteDetails: f.incompleteDetails,
    echo: t.r.echo,
  }
  await o.responses.save(t.tenant.id, record)
}

/** The Response object's fields that do not change while the turn runs. */
function fixedFields(t: Turn): Omit<ResponseObjectInput, keyof ResponseState> {
  return {
    id: t.id,
    createdAt: unixSeconds(t.createdAt),
    model: t.r.model,
    echo: t.r.echo,
    previousResponseId: t.r.previousResponseId ?? null,
    conversationId: t.r.conversationId ?? null,
  }
}
