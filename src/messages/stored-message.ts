/**
 * A message as the session stores hand it out: frozen, deeply, with its text made and its in-memory size noted once.
 * Both engines (storage/session-repo.ts, storage/postgres/session-store.ts) and the Responses chain walk
 * (responses/state.ts) build their histories from it.
 */
import type { Bytes, ChatMessage, StoredMessage, Tokens } from '../types.js'
import { messageText } from './text.js'

/** The message object and its wire copy, the JSON's framing and the map entries that hold them. */
const MESSAGE_FIXED_BYTES = 256

/** storedMessagesBytes's figure per message, made once when the message is built. */
const chars = new WeakMap<StoredMessage, Bytes>()

/** A stored message as reads return it (frozen, its text made). */
export function storedMessage(seq: number, message: ChatMessage, tokens: Tokens, createdAt: number): StoredMessage {
  // Frozen, deeply: the same objects are handed out from the cache to every request, and the message itself goes
  // upstream as it is (its JSON made once, chat/upstream-body.ts).
  const frozen = deepFreeze(message)
  const text = messageText(frozen)
  const m = Object.freeze({ seq, role: frozen.role, message: frozen, text, tokens, createdAt })
  const plain = typeof frozen.content === 'string' && frozen.tool_calls === undefined
  // Plain text: text plus JSON of about the same size. Anything else: its JSON (images, tool calls) counted as made.
  chars.set(m, (plain ? text.length * 4 : text.length * 2 + JSON.stringify(frozen).length * 2) + MESSAGE_FIXED_BYTES)
  return m
}

/**
 * What cached messages hold, at two bytes a character: their content, and the JSON of it that the chat path makes once
 * for the upstream body and keeps for as long as the message lives (chat/upstream-body.ts, keyed by the frozen
 * message or its frozen wire copy from the packer), which is the content again plus its escapes.
 */
export function storedMessagesBytes(messages: readonly StoredMessage[]): Bytes {
  let bytes = 0
  for (const m of messages) bytes += chars.get(m) ?? 0
  return bytes
}

function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === 'object' && !Object.isFrozen(v)) {
    for (const x of Object.values(v)) deepFreeze(x)
    Object.freeze(v)
  }
  return v
}
