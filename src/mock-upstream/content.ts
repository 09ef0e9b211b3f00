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

export function countChat(messages: unknown[]): number {
  const chat = messages.filter(isObject).map((m) => ({
    role: typeof m.role === 'string' ? m.role : 'user',
    content: contentText(m.content),
  }))
  return encodeChat(chat, 'gpt-4o', { disallowedSpecial: new Set() }).length
}

export function lastUserText(messages: unknown[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]
    if (isObject(m) && m.role === 'user') return contentText(m.content)
  }
  return ''
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
