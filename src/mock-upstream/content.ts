/**
 * What the mock reads from a chat request and what it makes up in reply: the last user text, the prompt's token
 * count, generated words, ids and embedding vectors. Pure functions; the randomness comes in as an Rng.
 */
import { createHash } from 'node:crypto'
import { encodeChat } from 'gpt-tokenizer'
import { mulberry32, type Rng } from './prng.js'
import { isObject } from './types.js'

/** The request body as JSON, or undefined when it is empty or not JSON. */
export function parseJson(text: string): unknown {
  if (text === '') return undefined
  try {
    return JSON.parse(text)
  } catch {
    // Recorded as undefined; the route answers 400 for a body it needs.
    return undefined
  }
}

/** The prompt's tokens as gpt-4o would read them (tool calls as their JSON): what the emulated cache compares. */
export function chatTokens(messages: unknown[]): number[] {
  const chat = messages.filter(isObject).map((m) => ({
    role: typeof m.role === 'string' ? m.role : 'user',
    content: contentText(m.content) + (Array.isArray(m.tool_calls) ? JSON.stringify(m.tool_calls) : ''),
  }))
  return encodeChat(chat, 'gpt-4o', { disallowedSpecial: new Set() })
}

/**
 * OpenAI's automatic prompt cache, emulated: a prompt's cached tokens are the longest prefix it shares with one of the
 * model's recent prompts, counted in 128-token steps from 1,024 tokens (shorter prefixes are not cached).
 */
export class PromptCache {
  readonly #recent = new Map<string, number[][]>()
  constructor(readonly size = 64) {}

  /** Cached tokens for this prompt; then it is remembered as a recent prompt of `model`. */
  lookup(model: string, tokens: number[]): number {
    let list = this.#recent.get(model)
    if (list === undefined) this.#recent.set(model, (list = []))
    let best = 0
    for (const p of list) {
      const n = Math.min(p.length, tokens.length)
      let i = 0
      while (i < n && p[i] === tokens[i]) i++
      if (i > best) best = i
    }
    list.push(tokens)
    if (list.length > this.size) list.shift()
    return best < 1024 ? 0 : best - (best % 128)
  }
}

export function lastUserText(messages: unknown[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]
    if (isObject(m) && m.role === 'user') return contentText(m.content)
  }
  return ''
}

/**
 * OpenAI's pairing rule, checked as OpenAI does (its texts, typo included): tool messages answer the tool_calls of the
 * assistant message right before them, and every call is answered. Written here on its own, not shared with the
 * gateway, so the gateway's implementation is tested against an independent one.
 */
export function pairingError(messages: unknown[]): { message: string; param: string } | undefined {
  let open: Set<string> | undefined
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]
    if (!isObject(m)) continue
    if (m.role === 'tool') {
      if (open === undefined)
        return { param: `messages.[${i}].role`, message: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'." }
      const id = String(m.tool_call_id)
      if (!open.delete(id)) return { param: `messages.[${i}].tool_call_id`, message: `Invalid parameter: 'tool_call_id' of '${id}' not found in 'tool_calls' of previous message.` }
      continue
    }
    if (open !== undefined && open.size > 0) return unanswered(open)
    open = undefined
    if (m.role === 'assistant' && Array.isArray(m.tool_calls) && m.tool_calls.length > 0)
      open = new Set(m.tool_calls.map((c) => String(isObject(c) ? c.id : '')))
  }
  return open !== undefined && open.size > 0 ? unanswered(open) : undefined
}

function unanswered(ids: Set<string>): { message: string; param: string } {
  return {
    param: 'messages',
    message: `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...ids].join(', ')}`,
  }
}

/** The call the mock makes by default: the first function tool, with arguments made up from its parameter schema. */
export function defaultToolCall(body: Record<string, unknown>, messages: unknown[]): { name: string; arguments: string } | undefined {
  if (!Array.isArray(body.tools) || body.tools.length === 0 || body.tool_choice === 'none') return undefined
  const last = messages.at(-1)
  if (isObject(last) && last.role === 'tool') return undefined
  const tool: unknown = body.tools.find((t) => isObject(t) && t.type === 'function' && isObject(t.function))
  const fn = isObject(tool) && isObject(tool.function) ? tool.function : undefined
  if (fn === undefined || typeof fn.name !== 'string') return undefined
  const args: Record<string, unknown> = {}
  const props = isObject(fn.parameters) && isObject(fn.parameters.properties) ? fn.parameters.properties : {}
  for (const [k, v] of Object.entries(props)) {
    const type = isObject(v) ? v.type : undefined
    args[k] = type === 'number' || type === 'integer' ? 1 : type === 'boolean' ? true : lastUserText(messages).slice(0, 40) || 'x'
  }
  return { name: fn.name, arguments: JSON.stringify(args) }
}

/** String content as is; OpenAI content parts by their text. */
function contentText(c: unknown): string {
  if (typeof c === 'string') return c
  if (Array.isArray(c)) return c.map((p) => (isObject(p) && typeof p.text === 'string' ? p.text : '')).join('')
  return c === undefined || c === null ? '' : JSON.stringify(c)
}

/** Split by code points so a streamed piece never ends inside a surrogate pair. */
export function splitCodePoints(s: string, size: number): string[] {
  const cps = Array.from(s)
  const out: string[] = []
  const n = Math.max(1, Math.floor(size))
  for (let i = 0; i < cps.length; i += n) out.push(cps.slice(i, i + n).join(''))
  return out
}

const VOCAB = ['the', 'memory', 'gateway', 'token', 'stream', 'context', 'model', 'answer', 'quick', 'data']
export function words(range: { min: number; max: number }, rng: Rng): string {
  const n = range.min + Math.floor(rng() * (Math.max(range.min, range.max) - range.min + 1))
  return Array.from({ length: n }, () => VOCAB[Math.floor(rng() * VOCAB.length)]).join(' ')
}

export function randomId(rng: Rng): string {
  const abc = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
  let s = '-'
  for (let i = 0; i < 16; i++) s += abc[Math.floor(rng() * abc.length)]
  return s
}

/** Deterministic unit vector from the text's hash: equal texts get equal vectors, different texts unrelated ones. */
export function embedText(text: string, dims: number): number[] {
  const next = mulberry32(createHash('sha256').update(text).digest().readUInt32LE(0))
  const v = Array.from({ length: dims }, () => next() * 2 - 1)
  const norm = Math.sqrt(v.reduce((n, x) => n + x * x, 0)) || 1
  return v.map((x) => x / norm)
}
