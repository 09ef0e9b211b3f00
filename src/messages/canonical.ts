/**
 * Canonical form of a message, for recognising messages a full-history client resends (chat/resent-history.ts).
 *
 * Two messages are the same when their role, content, tool calls (id, name, arguments), tool_call_id and name are.
 * Forms that clients and SDKs convert between freely are equal: `content: "hi"` and `[{type: "text", text: "hi"}]`,
 * `content: null`, `""` and absent. What providers add to replies and clients may or may not send back (`refusal:
 * null`, `reasoning`, `reasoning_details`, `annotations`) is not part of the identity. Equality is by position in the
 * conversation, never by a bare content hash: "yes" twice in a row is two messages.
 */
import { isArray, type ChatMessage, type ContentPart } from '../types.js'

const keys = new WeakMap<ChatMessage, string>()

export function canonicalKey(m: ChatMessage): string {
  let key = keys.get(m)
  if (key !== undefined) return key
  key = JSON.stringify([m.role, canonicalContent(m.content), canonicalCalls(m), m.tool_call_id ?? null, m.name ?? null])
  // Stored messages are frozen and shared: their key is made once. A request's own objects are new every time.
  if (Object.isFrozen(m)) keys.set(m, key)
  return key
}

function canonicalContent(c: ChatMessage['content']): unknown {
  if (c === undefined || c === null) return ''
  if (typeof c === 'string') return c
  if (!Array.isArray(c)) return sorted(c)
  if (c.every((p: ContentPart) => p.type === 'text' && typeof p.text === 'string')) {
    return c.map((p: ContentPart) => p.text as string).join('')
  }
  return c.map((p: ContentPart) => sorted(p))
}

function canonicalCalls(m: ChatMessage): unknown {
  const calls = m.tool_calls
  if (!isArray(calls) || calls.length === 0) return null
  return calls.map((c) => (c.function ? [c.id, c.function.name, c.function.arguments] : sorted(c)))
}

/** A value with object keys in sorted order, so field order never makes two equal messages differ. */
function sorted(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sorted)
  if (v === null || typeof v !== 'object') return v
  const out: Record<string, unknown> = {}
  for (const k of Object.keys(v).sort()) out[k] = sorted((v as Record<string, unknown>)[k])
  return out
}
