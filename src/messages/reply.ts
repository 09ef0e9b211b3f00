/**
 * The assistant's message as the client will see it next time, for memory: from a non-stream completion, or assembled
 * from a stream's deltas. Tool calls arrive in fragments keyed by `index` (the first carries id, type and name, the
 * rest pieces of `arguments`, several calls interleaved); text, refusal, reasoning and the arguments of the deprecated
 * `function_call` arrive as pieces to concatenate;
 * OpenRouter's `reasoning_details` as items to keep in order (pieces of one item share its `index`).
 *
 * Only the fields a client sends back in an assistant message are kept (role, content, refusal, tool_calls,
 * function_call, audio's id, name, reasoning, reasoning_details); what only describes a reply (annotations, logprobs)
 * is not part of the conversation.
 */
import { isObject, type ChatMessage, type ToolCall } from '../types.js'

/** `choices[0].message` of a completion, reduced to what a conversation carries. */
export function replyFromCompletion(completion: Record<string, unknown>): ChatMessage {
  const choices = completion.choices
  const first: unknown = Array.isArray(choices) ? choices[0] : undefined
  const msg = isObject(first) && isObject(first.message) ? first.message : {}
  const out: Record<string, unknown> = { role: 'assistant' }
  const content = msg.content
  out.content = typeof content === 'string' || Array.isArray(content) ? content : null
  for (const k of ['name', 'refusal', 'reasoning'] as const) if (typeof msg[k] === 'string' && msg[k] !== '') out[k] = msg[k]
  if (Array.isArray(msg.tool_calls) && msg.tool_calls.length > 0) out.tool_calls = msg.tool_calls
  if (isObject(msg.function_call)) out.function_call = msg.function_call
  if (isObject(msg.audio) && typeof msg.audio.id === 'string') out.audio = { id: msg.audio.id }
  if (Array.isArray(msg.reasoning_details) && msg.reasoning_details.length > 0) out.reasoning_details = msg.reasoning_details
  if (out.content === null && out.tool_calls === undefined && out.function_call === undefined && out.audio === undefined)
    out.content = ''
  return out as unknown as ChatMessage
}

/**
 * The completion's choice 0 finished with an error: OpenRouter reports an error met while the model was generating as
 * a 200 whose choice has `finish_reason: "error"` (and the error beside it). The reply is relayed as it came; the
 * exchange failed, and a failed exchange is not saved.
 */
export function generationFailed(completion: Record<string, unknown>): boolean {
  const choices = completion.choices
  return isFailedChoice(Array.isArray(choices) ? choices[0] : undefined)
}

/**
 * A choice (a completion's, or a stream chunk's) that reports a failure while generating: it finishes with `error`, or
 * it carries an `error` object whatever its finish reason. The one test of the JSON reply (`generationFailed`) and the
 * stream (chat/relay-stream.ts), so the two agree on which exchange failed.
 */
export function isFailedChoice(choice: unknown): boolean {
  return isObject(choice) && (choice.finish_reason === 'error' || isObject(choice.error))
}

/** A function's name and arguments as they arrive: a tool call's `function`, or the deprecated `function_call`. */
interface FunctionParts {
  name: string
  arguments: string
}

interface CallParts {
  id: string
  type: string
  fn: FunctionParts
}

/**
 * One fragment of a function: a name comes whole (in the first fragment; some providers repeat it in every one) and
 * is taken, not appended, as the official SDKs assemble it, so memory keeps the call the client saw; arguments come in
 * pieces.
 */
function addFragment(to: FunctionParts, f: Record<string, unknown>): void {
  if (typeof f.name === 'string' && f.name !== '') to.name = f.name
  if (typeof f.arguments === 'string') to.arguments += f.arguments
}

/** Collects `choices[0].delta` pieces of a stream into the assistant message. */
export class ReplyAssembler {
  #content = ''
  #refusal = ''
  #reasoning = ''
  #calls: CallParts[] = []
  #details: Record<string, unknown>[] = []
  /** The deprecated `function_call` (the `functions` API): its name and arguments arrive in pieces, as a tool call's. */
  #functionCall: FunctionParts | undefined
  #audioId: string | undefined
  /** Content pieces seen: the first marks the time to first token. */
  pieces = 0

  /** One `choices[0].delta`. Returns true when it carried model output (text, refusal, a tool call, reasoning). */
  push(delta: unknown): boolean {
    if (!isObject(delta)) return false
    let output = false
    if (typeof delta.content === 'string' && delta.content !== '') {
      this.#content += delta.content
      output = true
    }
    if (typeof delta.refusal === 'string' && delta.refusal !== '') {
      this.#refusal += delta.refusal
      output = true
    }
    if (typeof delta.reasoning === 'string' && delta.reasoning !== '') {
      this.#reasoning += delta.reasoning
      output = true
    }
    if (Array.isArray(delta.tool_calls)) {
      for (const c of delta.tool_calls) if (this.#toolCall(c)) output = true
    }
    if (isObject(delta.function_call)) {
      addFragment((this.#functionCall ??= { name: '', arguments: '' }), delta.function_call)
      output = true
    }
    if (Array.isArray(delta.reasoning_details)) {
      for (const d of delta.reasoning_details) if (isObject(d)) this.#detail(d)
    }
    if (isObject(delta.audio) && typeof delta.audio.id === 'string') this.#audioId = delta.audio.id
    if (output) this.pieces++
    return output
  }

  /** A content piece read without parsing its event (chat/content-delta.ts): what `push` does with `{content}`. */
  pushContent(text: string): boolean {
    if (text === '') return false
    this.#content += text
    this.pieces++
    return true
  }

  /** The content text so far (what the client has been shown). */
  get text(): string {
    return this.#content
  }

  message(): ChatMessage {
    const out: Record<string, unknown> = { role: 'assistant' }
    const calls: ToolCall[] = this.#calls
      .filter((c) => c !== undefined)
      .map((c) => ({ id: c.id, type: c.type, function: { ...c.fn } }))
    const called = calls.length > 0 || this.#functionCall !== undefined
    out.content = this.#content !== '' || !called ? this.#content : null
    if (this.#refusal !== '') out.refusal = this.#refusal
    if (this.#reasoning !== '') out.reasoning = this.#reasoning
    if (calls.length > 0) out.tool_calls = calls
    if (this.#functionCall !== undefined) out.function_call = { ...this.#functionCall }
    if (this.#details.length > 0) out.reasoning_details = this.#details
    if (this.#audioId !== undefined) out.audio = { id: this.#audioId }
    return out as unknown as ChatMessage
  }

  #toolCall(c: unknown): boolean {
    if (!isObject(c)) return false
    const index = typeof c.index === 'number' && Number.isInteger(c.index) && c.index >= 0 && c.index < 1024 ? c.index : this.#calls.length
    let call = this.#calls[index]
    if (call === undefined) this.#calls[index] = call = { id: '', type: 'function', fn: { name: '', arguments: '' } }
    if (typeof c.id === 'string' && c.id !== '') call.id = c.id
    if (typeof c.type === 'string' && c.type !== '') call.type = c.type
    if (isObject(c.function)) addFragment(call.fn, c.function)
    return true
  }

  #detail(d: Record<string, unknown>): void {
    const last = this.#details.at(-1)
    // Pieces of one reasoning item share its index and type: their text (or summary) continues the item.
    if (last !== undefined && d.index !== undefined && last.index === d.index && last.type === d.type) {
      for (const k of ['text', 'summary', 'data'] as const) {
        if (typeof d[k] === 'string') last[k] = (typeof last[k] === 'string' ? last[k] : '') + d[k]
      }
      if (typeof d.signature === 'string') last.signature = d.signature
      return
    }
    this.#details.push({ ...d })
  }
}
