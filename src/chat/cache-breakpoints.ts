/**
 * Prompt-cache breakpoints for providers that need them. Anthropic caches only up to explicit `cache_control` marks
 * (OpenRouter accepts them on content parts and passes them on); OpenAI, DeepSeek and Google cache prefixes on their
 * own. With `PROMPT_CACHE=auto`, an Anthropic model's prompt gets a mark at the end of the system prompt and at the
 * end of the history — the stable prefix (context/packer.ts) — so the next turn reads both from the cache even when
 * the history's start has jumped. A client that marks anything itself is left alone: it knows its prompt better.
 */
import type { ChatMessage, ContentPart } from '../types.js'

const EPHEMERAL = Object.freeze({ type: 'ephemeral' })

/** Whether this model's provider caches only at explicit breakpoints. */
export function needsBreakpoints(model: string): boolean {
  return model.startsWith('anthropic/')
}

/** The request already carries `cache_control` somewhere (top level, a message, or a content part). */
export function clientMarksCache(body: Readonly<Record<string, unknown>>, messages: readonly ChatMessage[]): boolean {
  if (body.cache_control !== undefined) return true
  for (const m of messages) {
    if (m.cache_control !== undefined) return true
    if (Array.isArray(m.content) && m.content.some((p: ContentPart) => p.cache_control !== undefined)) return true
  }
  return false
}

const marked = new WeakMap<ChatMessage, ChatMessage>()

/**
 * `messages` with breakpoints after message `systemEnd - 1` and `stableEnd - 1` (each moved back to the nearest
 * message with text to carry it). The marked copies of frozen (stored) messages are made once and frozen, so their
 * JSON is still made once (upstream-body.ts).
 */
export function withBreakpoints(messages: readonly ChatMessage[], systemEnd: number, stableEnd: number): ChatMessage[] {
  const out = messages.slice()
  const done = new Set<number>()
  for (const end of [systemEnd, stableEnd]) {
    for (let i = end - 1; i >= 0; i--) {
      const m = out[i] as ChatMessage
      if (done.has(i)) break
      const copy = markLast(m)
      if (copy === undefined) continue
      out[i] = copy
      done.add(i)
      break
    }
  }
  return out
}

/** A copy of `m` whose last text part carries the breakpoint; undefined when it has no text to carry one. */
function markLast(m: ChatMessage): ChatMessage | undefined {
  const known = marked.get(m)
  if (known !== undefined) return known
  const c = m.content
  let parts: ContentPart[] | undefined
  if (typeof c === 'string' && c !== '') parts = [{ type: 'text', text: c, cache_control: EPHEMERAL }]
  else if (Array.isArray(c)) {
    const last = c.findLastIndex((p: ContentPart) => p.type === 'text')
    // An existing cache_control is overridden by ours; a literal that starts with a spread and adds a key it lacks is
    // built through V8's slow path.
    if (last >= 0) parts = c.map((p: ContentPart, j: number) => (j !== last ? p : Object.hasOwn(p, 'cache_control') ? { ...p, cache_control: EPHEMERAL } : { cache_control: EPHEMERAL, ...p }))
  }
  if (parts === undefined) return undefined
  const copy: ChatMessage = { ...m, content: parts }
  if (Object.isFrozen(m)) {
    Object.freeze(copy)
    marked.set(m, copy)
  }
  return copy
}
