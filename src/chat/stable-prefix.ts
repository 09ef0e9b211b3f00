/**
 * `_metadata.context.stablePrefixTokens`: how many of a prompt's tokens are the same prefix as the previous request of
 * the same session, as packed — what a provider's prefix cache can serve.
 *
 * Per session, the previous prompt is kept as one 32-bit fingerprint per message (`hashText` of its JSON, the bytes the
 * provider sees; a collision only over-reports a prefix) and its tokens; the first fingerprint covers the model, the tool
 * definitions and the response schema, which providers render ahead of the messages. Fingerprints of history messages are made once per (frozen, shared) message object.
 * Bounded: an LRU of sessions; per process (a replica that has not seen the previous request reports 0).
 */
import { LRUCache } from 'lru-cache'
import type { ChatMessage, Tokens } from '../types.js'
import { hashText } from '../context/range-cache.js'
import { messageJson } from './upstream-body.js'

interface Prompt {
  prints: Uint32Array
  /** Tokens of each fingerprinted element (the head's: the tool definitions and response schema). */
  tokens: Float64Array
}

const prints = new WeakMap<ChatMessage, number>()

export class StablePrefix {
  readonly #sessions: LRUCache<string, Prompt>

  constructor(maxSessions: number) {
    this.#sessions = new LRUCache({ max: Math.max(1, maxSessions) })
  }

  /**
   * Record this prompt for the session and return the tokens it shares with the previous one from the start. `head` is
   * what precedes the messages (model, tools JSON), counted as `headTokens`.
   */
  observe(
    session: string,
    head: string,
    headTokens: Tokens,
    messages: readonly ChatMessage[],
    messageTokens: readonly Tokens[],
  ): Tokens {
    const n = messages.length + 1
    const now: Prompt = { prints: new Uint32Array(n), tokens: new Float64Array(n) }
    now.prints[0] = hashText(head)
    now.tokens[0] = headTokens
    for (let i = 0; i < messages.length; i++) {
      now.prints[i + 1] = fingerprint(messages[i] as ChatMessage)
      now.tokens[i + 1] = messageTokens[i] ?? 0
    }
    const before = this.#sessions.get(session)
    this.#sessions.set(session, now)
    if (before === undefined) return 0
    let shared = 0
    const m = Math.min(before.prints.length, n)
    for (let i = 0; i < m && before.prints[i] === now.prints[i]; i++) shared += now.tokens[i] ?? 0
    return shared
  }
}

function fingerprint(m: ChatMessage): number {
  let p = prints.get(m)
  if (p === undefined) {
    p = hashText(messageJson(m))
    if (Object.isFrozen(m)) prints.set(m, p)
  }
  return p
}
