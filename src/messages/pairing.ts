/**
 * OpenAI's pairing rule for tool calls, and the units it makes of a conversation.
 *
 * The rule (what OpenAI enforces with a 400, and what Anthropic and others need to make sense of a conversation):
 * tool messages answer the `tool_calls` of the assistant message right before them, and every call is answered before
 * the next non-tool message. An assistant message with tool calls plus all of its results is therefore one unit:
 * packing keeps or drops it whole, and nothing is ever inserted inside it.
 */
import type { ChatMessage } from '../types.js'

export interface PairingViolation {
  /** Index (in the checked list) of the message at fault. */
  index: number
  /** Which field: `role` or `tool_call_id`. */
  field: 'role' | 'tool_call_id'
  /** OpenAI's own text for it (its typo included: clients match on these). */
  message: string
}

/** The first violation of the pairing rule in `messages`, or undefined when it holds. */
export function checkPairing(messages: readonly ChatMessage[]): PairingViolation | undefined {
  let host = -1
  let pending: Set<string> | undefined
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as ChatMessage
    if (m.role === 'tool') {
      if (pending === undefined) {
        return {
          index: i,
          field: 'role',
          message: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
        }
      }
      const id = m.tool_call_id ?? ''
      if (!pending.delete(id)) {
        return {
          index: i,
          field: 'tool_call_id',
          message: `Invalid parameter: 'tool_call_id' of '${id}' not found in 'tool_calls' of previous message.`,
        }
      }
      continue
    }
    if (pending !== undefined && pending.size > 0) return unanswered(host, pending)
    pending = undefined
    const calls = m.role === 'assistant' ? m.tool_calls : undefined
    if (calls !== undefined && calls !== null && calls.length > 0) {
      host = i
      pending = new Set(calls.map((c) => c.id))
    }
  }
  if (pending !== undefined && pending.size > 0) return unanswered(host, pending)
  return undefined
}

function unanswered(index: number, ids: ReadonlySet<string>): PairingViolation {
  return {
    index,
    field: 'role',
    message:
      "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. " +
      `The following tool_call_ids did not have response messages: ${[...ids].join(', ')}`,
  }
}

/** An assistant message that calls tools. */
export function hasToolCalls(m: Pick<ChatMessage, 'role' | 'tool_calls'>): boolean {
  return m.role === 'assistant' && Array.isArray(m.tool_calls) && m.tool_calls.length > 0
}

/**
 * `messages` cut into units: an assistant message with tool calls and the tool messages that follow it form one unit;
 * every other message is a unit of its own. `complete` is false for a tool unit whose calls are not all answered (or
 * answered by ids it did not make) and for tool messages with no call before them: such units cannot be sent as they
 * are. Returns [start, end) index pairs in order.
 */
export function toolUnits(messages: readonly { readonly message: ChatMessage }[]): Array<{ start: number; end: number; complete: boolean }> {
  const out: Array<{ start: number; end: number; complete: boolean }> = []
  let i = 0
  while (i < messages.length) {
    const m = (messages[i] as { message: ChatMessage }).message
    if (hasToolCalls(m)) {
      const pending = new Set((m.tool_calls ?? []).map((c) => c.id))
      let end = i + 1
      let complete = true
      while (end < messages.length) {
        const t = (messages[end] as { message: ChatMessage }).message
        if (t.role !== 'tool') break
        if (!pending.delete(t.tool_call_id ?? '')) complete = false
        end++
      }
      out.push({ start: i, end, complete: complete && pending.size === 0 })
      i = end
      continue
    }
    out.push({ start: i, end: i + 1, complete: m.role !== 'tool' })
    i++
  }
  return out
}
