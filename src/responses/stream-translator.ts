/**
 * Chat Completions stream chunks → Responses stream events (reference §4, §8 "state machine", pitfalls 10–12): a
 * small state machine that knows nothing of HTTP. The caller writes what each method returns, in order.
 *
 *   start()      response.created, response.in_progress (before the upstream answers: clients' idle timers, and the
 *                id is fixed for the whole stream)
 *   push(chunk)  per parsed `chat.completion.chunk`: item and delta events
 *   finish()     closes what is open; the caller then PERSISTS the response, and only then writes
 *   terminal()   response.completed | response.incomplete | response.failed, carrying the whole response
 *   fail(err)    instead of finish/terminal, once SSE has started: the open message or reasoning item closed as
 *                `incomplete`, then `error`, then response.failed
 *
 * The rules clients enforce (§4d): one item open at a time, `output_index` contiguous from 0 in the order items are
 * added, `content_part.added` before its deltas, `item_id` the item's id, only official event types, and a terminal
 * `output` identical to the items of the `output_item.done` events. Hence:
 * - Tool calls are emitted one at a time. A call that starts while another is open is buffered; the open one is
 *   closed when its arguments parse as complete JSON (nothing valid can follow a complete JSON value, so a provider
 *   that interleaves calls has finished that one) or at the end, and the buffered ones then stream in order.
 * - Text or a refusal arriving after the first tool call (rare) is kept for one more message after the calls, so an
 *   item never reopens.
 * - Reasoning (OpenRouter `delta.reasoning`) streams as a reasoning item with a summary part (see output.ts for why
 *   it is shown) while it is the first thing the model produces; reasoning after the answer has begun is not shown.
 * - A custom tool's input is the `input` string inside JSON arguments; it is sent whole when the call closes.
 * Tool-call deltas are assembled by tool-call-tracker.ts, the event payloads built by stream-events.ts.
 */
import { isObject } from '../types.js'
import type { NewId, ResponseItem } from './item-types.js'
import * as ev from './stream-events.js'
import { ToolCallTracker, completeJson, type TrackedCall } from './tool-call-tracker.js'
import { flattenAnnotations, mapLogprobs, mapUsage, reasoningItem, statusFromFinish, toolCallItem, type ResponseStatus, type ResponseUsage } from './output.js'

export type { ResponseEvent } from './stream-events.js'
export { encodeEvent, encodeEvents, JsonText } from './stream-events.js'

type ResponseEvent = ev.ResponseEvent
type ErrorBody = { code: string; message: string }
type Snapshot = (
  status: ResponseStatus,
  output: ResponseItem[],
  usage: ResponseUsage | null,
  error: ErrorBody | null,
  incompleteDetails: { reason: string } | null,
  /** `output` as JSON text (the items' text the stream already made), for a snapshot rendered as text. */
  outputJson: string,
) => object // the Response object, or its JSON text (a JsonText)

type Open =
  | { kind: 'reasoning'; id: string; index: number; text: string }
  /** `where`: the last part's partWhere text, made when it opens (its events' shared fields). */
  | { kind: 'message'; id: string; index: number; parts: ev.Part[]; where: string }
  | { kind: 'call'; id: string; index: number; call: TrackedCall }

export class ResponseStreamTranslator {
  readonly #newId: NewId
  readonly #customTools: ReadonlySet<string>
  readonly #base: Snapshot
  #seq = 0
  #phase: 'new' | 'streaming' | 'finished' | 'ended' = 'new'
  readonly #output: ResponseItem[] = []
  /** The JSON text of each output item whose text was made for its events (a message's), else undefined. */
  readonly #outputJson: Array<string | undefined> = []
  #open: Open | undefined
  #messages = 0
  readonly #calls = new ToolCallTracker()
  #tail = { text: '', refusal: '', annotations: [] as Record<string, unknown>[], logprobs: [] as unknown[] }
  #finishReason: string | null = null
  #usage: unknown
  #error: ErrorBody | null = null
  #final: ReturnType<typeof statusFromFinish> & { usage: ResponseUsage } = { status: 'completed', incompleteDetails: null, usage: mapUsage(undefined) }

  readonly #leading: readonly ResponseItem[]

  /**
   * `leading`: items the gateway made before the model answered (a `file_search_call`), sent whole right after
   * `in_progress` at the first output indexes.
   */
  constructor(opts: { newId: NewId; customTools: ReadonlySet<string>; base: Snapshot; leading?: readonly ResponseItem[] }) {
    this.#newId = opts.newId
    this.#customTools = opts.customTools
    this.#base = opts.base
    this.#leading = opts.leading ?? []
  }

  start(): ResponseEvent[] {
    this.#expect('new', 'start')
    this.#phase = 'streaming'
    const snapshot = this.#base('in_progress', [], null, null, null, '[]')
    const out = [this.#snapshot('response.created', snapshot), this.#snapshot('response.in_progress', snapshot)]
    for (const item of this.#leading) {
      const index = this.#output.length
      out.push(this.#event('response.output_item.added', { output_index: index, item }))
      this.#output.push(item)
      this.#outputJson.push(undefined)
      out.push(this.#event('response.output_item.done', { output_index: index, item }))
    }
    return out
  }

  push(chunk: Record<string, unknown>): ResponseEvent[] {
    this.#expect('streaming', 'push')
    const out: ResponseEvent[] = []
    if (isObject(chunk.usage)) this.#usage = chunk.usage
    // OpenRouter reports a failure after HTTP 200 as a chunk with an `error` field (finish_reason "error").
    if (isObject(chunk.error)) this.#error = ev.upstreamError(chunk.error)
    const choices = chunk.choices
    const choice: unknown = Array.isArray(choices) ? choices[0] : undefined
    if (!isObject(choice)) return out
    const delta = isObject(choice.delta) ? choice.delta : {}
    if (typeof delta.reasoning === 'string' && delta.reasoning !== '') this.#reasoning(delta.reasoning, out)
    // The text's log probabilities sit beside the delta, on the choice (only there when the caller asked for them).
    if (typeof delta.content === 'string' && delta.content !== '') this.#content('output_text', delta.content, out, false, mapLogprobs(choice.logprobs))
    if (typeof delta.refusal === 'string' && delta.refusal !== '') this.#content('refusal', delta.refusal, out)
    const annotations = flattenAnnotations(delta.annotations)
    if (annotations.length > 0) this.#annotations(annotations, out)
    if (Array.isArray(delta.tool_calls)) {
      for (const c of delta.tool_calls) if (isObject(c)) this.#toolCall(c, out)
      this.#advanceCalls(out)
    }
    if (typeof choice.finish_reason === 'string') this.#finishReason = choice.finish_reason
    return out
  }

  /**
   * A piece of text read without parsing its event (chat/content-delta.ts): what `push` would make of the event,
   * encoded, when the piece simply continues the open message's text (a `response.output_text.delta`) or is empty (the
   * role's event, the finish's: nothing, the finish reason kept); undefined otherwise, and the caller pushes the parsed
   * chunk instead. The text is written as the upstream escaped it (`piece.json`), the rest as `push` would make it:
   * the same events, without building and serialising an object per piece, nor parsing the event.
   */
  pushText(piece: { readonly text: string; readonly json: string; readonly finishReason: string | null }): string | undefined {
    if (this.#phase !== 'streaming') return undefined
    const out = piece.text === '' ? '' : this.#textEvents(piece)
    if (out !== undefined && piece.finishReason !== null) this.#finishReason = piece.finishReason
    return out
  }

  #textEvents(piece: { readonly text: string; readonly json: string }): string | undefined {
    if (this.#calls.size > 0) return undefined
    const m = this.#open
    if (m === undefined) {
      // The first text: the message and its part open as `push` opens them (what a text-only event makes there).
      const out: ResponseEvent[] = []
      this.#content('output_text', piece.text, out)
      return ev.encodeEvents(out)
    }
    if (m.kind !== 'message') return undefined
    const part = m.parts.at(-1)
    if (part?.type !== 'output_text') return undefined
    part.text += piece.text
    return ev.textDeltaFrame(this.#seq++, m.where, piece.json)
  }

  finish(): { events: ResponseEvent[]; output: ResponseItem[]; usage: ResponseUsage; status: ResponseStatus; incompleteDetails: { reason: string } | null } {
    this.#expect('streaming', 'finish')
    this.#phase = 'finished'
    const s = this.#error !== null ? { status: 'failed' as const, incompleteDetails: null } : statusFromFinish(this.#finishReason)
    const cut = s.status === 'incomplete'
    const out: ResponseEvent[] = []
    const pending = this.#calls.pending()
    const tail = this.#tail.text !== '' || this.#tail.refusal !== '' || this.#tail.annotations.length > 0
    // A reply with no message and no call still says something: an empty message (as completionToOutput).
    const empty = !tail && this.#messages === 0 && this.#calls.size === 0
    this.#closeOpen(out, cut && pending.length === 0 && !tail && !empty)
    pending.forEach((c, k) => {
      this.#openCall(c, out)
      this.#closeOpen(out, cut && k === pending.length - 1 && !tail)
    })
    if (tail || empty) {
      const { text, refusal, annotations, logprobs } = this.#tail
      if (text !== '' || annotations.length > 0 || empty) this.#content('output_text', text, out, true, logprobs)
      if (annotations.length > 0) this.#annotations(annotations, out)
      if (refusal !== '') this.#content('refusal', refusal, out, true)
      this.#closeOpen(out, cut)
    }
    if (s.status === 'failed') {
      const err = this.#failure()
      out.push(this.#event('error', ev.errorFields(err)))
    }
    // Written out: a spread followed by a key it lacks takes V8's slow path (responses/handler.ts says the cost).
    this.#final = { status: s.status, incompleteDetails: s.incompleteDetails, usage: mapUsage(this.#usage) }
    return { events: out, output: [...this.#output], usage: this.#final.usage, status: s.status, incompleteDetails: s.incompleteDetails }
  }

  terminal(): ResponseEvent {
    this.#expect('finished', 'terminal')
    this.#phase = 'ended'
    const { status, incompleteDetails, usage } = this.#final
    const error = status === 'failed' ? this.#failure() : null
    const type = status === 'failed' ? 'response.failed' : status === 'incomplete' ? 'response.incomplete' : 'response.completed'
    return this.#snapshot(type, this.#base(status, [...this.#output], usage, error, incompleteDetails, this.#outputText()))
  }

  /**
   * The stream cannot go on (upstream died, choice 0 failed, persisting failed): the items already done, and the message
   * or reasoning item still open, are the output. The reference (§4c) shows `response.failed` with `output:[…]` and the
   * recorded OpenAI failures came before any item, so what an open item becomes is our choice: closed with status
   * `incomplete` (the item status OpenAI gives the message a length limit cut), its text so far kept, since the client
   * was shown it and the terminal `output` must equal the `output_item.done` items. An open tool call is left open and
   * out of the output: Codex and the AI SDK run a call when its `output_item.done` comes, and this one the model never
   * finished (its arguments may be half a JSON value). Calls still buffered and text kept after the calls were never
   * shown and stay out too.
   */
  fail(err: ErrorBody & { type?: string }): ResponseEvent[] {
    if (this.#phase === 'new' || this.#phase === 'ended') throw new Error(`ResponseStreamTranslator.fail() after ${this.#phase === 'new' ? 'no start()' : 'the terminal event'}`)
    this.#phase = 'ended'
    const out: ResponseEvent[] = []
    if (this.#open !== undefined && this.#open.kind !== 'call') this.#closeOpen(out, true)
    const error = { code: err.code, message: err.message }
    out.push(
      this.#event('error', ev.errorFields(err)),
      this.#snapshot('response.failed', this.#base('failed', [...this.#output], mapUsage(this.#usage), error, null, this.#outputText())),
    )
    return out
  }

  // ---- items ---------------------------------------------------------------------------------------------------

  #reasoning(text: string, out: ResponseEvent[]): void {
    const open = this.#open
    if (open?.kind === 'reasoning') {
      open.text += text
      out.push(this.#event('response.reasoning_summary_text.delta', ev.summaryDelta(open, text)))
      return
    }
    // Only while nothing else has been said (see the module comment).
    if (open !== undefined || this.#output.length > 0 || this.#calls.size > 0) return
    const r = { kind: 'reasoning' as const, id: this.#newId('rs'), index: this.#output.length, text }
    this.#open = r
    out.push(this.#event('response.output_item.added', { output_index: r.index, item: { id: r.id, type: 'reasoning', summary: [] } }))
    out.push(this.#event('response.reasoning_summary_part.added', ev.summaryPart(r, '')))
    out.push(this.#event('response.reasoning_summary_text.delta', ev.summaryDelta(r, text)))
  }

  /** Text or refusal. `force`: finish() writing the tail message. `logprobs`: the text's tokens (mapLogprobs). */
  #content(type: 'output_text' | 'refusal', text: string, out: ResponseEvent[], force = false, logprobs: readonly unknown[] = []): void {
    if (!force && this.#calls.size > 0) {
      if (type === 'output_text') {
        this.#tail.text += text
        this.#tail.logprobs.push(...logprobs)
      } else this.#tail.refusal += text
      return
    }
    const m = this.#message(out)
    let part = m.parts.at(-1)
    if (part?.type !== type) {
      if (part !== undefined) out.push(...this.#closePart(m, part))
      part = type === 'output_text' ? { type, text: '', annotations: [] } : { type, refusal: '' }
      m.parts.push(part)
      m.where = ev.partWhere(m.id, m.index, m.parts.length - 1)
      out.push(
        type === 'output_text'
          ? ev.textPartAdded(this.#seq++, m.where)
          : this.#event('response.content_part.added', ev.at(m, { content_index: m.parts.length - 1, part: ev.emptyPart(type) })),
      )
    }
    if (text === '') return
    const contentIndex = m.parts.length - 1
    if (part.type === 'output_text') {
      part.text += text
      if (logprobs.length > 0) (part.logprobs ??= []).push(...logprobs)
      out.push(ev.textDelta(this.#seq++, m.where, JSON.stringify(text), logprobs.length === 0 ? '[]' : JSON.stringify(logprobs)))
    } else {
      part.refusal += text
      out.push(this.#event('response.refusal.delta', ev.at(m, { content_index: contentIndex, delta: text })))
    }
  }

  #annotations(annotations: Record<string, unknown>[], out: ResponseEvent[]): void {
    if (this.#calls.size > 0 && this.#open?.kind !== 'message') {
      this.#tail.annotations.push(...annotations)
      return
    }
    const last = this.#open?.kind === 'message' ? this.#open.parts.at(-1) : undefined
    if (last?.type !== 'output_text') this.#content('output_text', '', out, true)
    const m = this.#open as Extract<Open, { kind: 'message' }>
    const part = m.parts.at(-1) as Extract<ev.Part, { type: 'output_text' }>
    for (const annotation of annotations) {
      part.annotations.push(annotation)
      out.push(
        this.#event('response.output_text.annotation.added', ev.at(m, {
          content_index: m.parts.length - 1,
          annotation_index: part.annotations.length - 1,
          annotation,
        })),
      )
    }
  }

  /** The open message, opened (closing a reasoning item) when there is none. */
  #message(out: ResponseEvent[]): Extract<Open, { kind: 'message' }> {
    if (this.#open?.kind === 'message') return this.#open
    this.#closeOpen(out, false)
    const m = { kind: 'message' as const, id: this.#newId('msg'), index: this.#output.length, parts: [] as ev.Part[], where: '' }
    this.#open = m
    this.#messages++
    out.push(ev.messageAdded(this.#seq++, m.id, m.index))
    return m
  }

  #toolCall(c: Record<string, unknown>, out: ResponseEvent[]): void {
    const { call, args } = this.#calls.apply(c)
    const open = this.#open
    if (args !== '' && open?.kind === 'call' && open.call === call && !this.#customTools.has(call.name)) {
      out.push(this.#event('response.function_call_arguments.delta', ev.at(open, { delta: args })))
    }
  }

  /** Opens the next buffered call when the open one is done (see the module comment). */
  #advanceCalls(out: ResponseEvent[]): void {
    for (;;) {
      const next = this.#calls.next()
      if (next === undefined) return
      const open = this.#open
      if (open?.kind === 'call' && !completeJson(open.call.args)) return
      this.#closeOpen(out, false)
      this.#openCall(next, out)
    }
  }

  #openCall(call: TrackedCall, out: ResponseEvent[]): void {
    call.state = 'open'
    call.id = this.#newId(this.#customTools.has(call.name) ? 'ctc' : 'fc')
    call.callId = call.upstreamId !== '' ? call.upstreamId : this.#newId('call')
    const index = this.#output.length
    this.#open = { kind: 'call', id: call.id, index, call }
    const custom = this.#customTools.has(call.name)
    const item = custom
      ? { id: call.id, type: 'custom_tool_call', call_id: call.callId, name: call.name, input: '' }
      : { id: call.id, type: 'function_call', status: 'in_progress', arguments: '', call_id: call.callId, name: call.name }
    out.push(this.#event('response.output_item.added', { output_index: index, item }))
    if (!custom && call.args !== '') out.push(this.#event('response.function_call_arguments.delta', { item_id: call.id, output_index: index, delta: call.args }))
  }

  /** Closes the open item; `incomplete` marks it as the one the length limit (or a filter) cut. */
  #closeOpen(out: ResponseEvent[], incomplete: boolean): void {
    const open = this.#open
    if (open === undefined) return
    this.#open = undefined
    const status = incomplete ? 'incomplete' : 'completed'
    let item: ResponseItem
    let itemJson: string | undefined
    if (open.kind === 'reasoning') {
      out.push(this.#event('response.reasoning_summary_text.done', ev.at(open, { summary_index: 0, text: open.text })))
      out.push(this.#event('response.reasoning_summary_part.done', ev.summaryPart(open, open.text)))
      item = reasoningItem(open.id, open.text)
    } else if (open.kind === 'message') {
      const last = open.parts.at(-1)
      if (last !== undefined) out.push(...this.#closePart(open, last))
      item = { id: open.id, type: 'message', status, content: open.parts.map(ev.finalPart), role: 'assistant' }
      itemJson = ev.messageItemJson(open.id, status, open.parts.map((p) => this.#partJson(p)))
    } else {
      const call = open.call
      call.state = 'closed'
      item = toolCallItem({ id: call.id, callId: call.callId, name: call.name, args: call.args, status }, this.#customTools)
      if (item.type === 'custom_tool_call') {
        const input = String(item.input)
        if (input !== '') out.push(this.#event('response.custom_tool_call_input.delta', ev.at(open, { delta: input })))
        out.push(this.#event('response.custom_tool_call_input.done', ev.at(open, { input })))
      } else {
        out.push(this.#event('response.function_call_arguments.done', ev.at(open, { arguments: call.args, name: call.name })))
      }
    }
    this.#output.push(item)
    this.#outputJson.push(itemJson)
    out.push(itemJson === undefined ? this.#event('response.output_item.done', { output_index: open.index, item }) : ev.itemDone(this.#seq++, open.index, itemJson))
  }

  #closePart(m: Extract<Open, { kind: 'message' }>, part: ev.Part): ResponseEvent[] {
    if (part.type === 'output_text') {
      // The text's JSON is made once, here, for this event, content_part.done, output_item.done and the terminal event.
      const json = JSON.stringify(part.text)
      part.json = json
      // Only the last part is open; the text part closed by a refusal that follows it is rare (where is rebuilt).
      const where = m.parts.at(-1) === part ? m.where : ev.partWhere(m.id, m.index, m.parts.indexOf(part))
      const logprobs = part.logprobs === undefined ? '[]' : JSON.stringify(part.logprobs)
      return [ev.textDone(this.#seq++, where, json, logprobs), ev.partDone(this.#seq++, where, this.#partJson(part))]
    }
    const contentIndex = m.parts.indexOf(part)
    return [
      this.#event('response.refusal.done', ev.at(m, { content_index: contentIndex, refusal: part.refusal })),
      this.#event('response.content_part.done', ev.at(m, { content_index: contentIndex, part: ev.finalPart(part) })),
    ]
  }

  /** finalPart(p) as JSON text, the text's JSON reused from its done event. */
  #partJson(p: ev.Part): string {
    if (p.type !== 'output_text') return JSON.stringify(ev.finalPart(p))
    return ev.textPartJson(p.annotations, p.json ?? JSON.stringify(p.text), p.logprobs)
  }

  /** The output so far as JSON text: the items' text made for their events, the others serialized. */
  #outputText(): string {
    let out = ''
    for (let i = 0; i < this.#output.length; i++) out += `${i === 0 ? '' : ','}${this.#outputJson[i] ?? JSON.stringify(this.#output[i])}`
    return `[${out}]`
  }

  /** A snapshot event: spliced around the snapshot's text when it is rendered as text. */
  #snapshot(type: string, response: object): ResponseEvent {
    return response instanceof ev.JsonText ? ev.snapshotEvent(type, this.#seq++, response) : this.#event(type, { response })
  }

  #failure(): ErrorBody {
    return this.#error ?? { code: 'server_error', message: 'The upstream provider failed while generating the response' }
  }

  #event(type: string, fields: Record<string, unknown>): ResponseEvent {
    return { type, sequence_number: this.#seq++, ...fields }
  }

  #expect(phase: 'new' | 'streaming' | 'finished', method: string): void {
    if (this.#phase !== phase) throw new Error(`ResponseStreamTranslator.${method}() in phase ${this.#phase}`)
  }
}
