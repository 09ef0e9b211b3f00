/**
 * The JSON body sent upstream: the client's fields verbatim, with `messages` replaced by the packed list.
 *
 * Session history is the bulk of a long chat's prompt and the same on every turn: its messages reach us as frozen
 * objects shared by every request (the session cache's entries, storage/session-repo.ts), so each one's JSON is made
 * once and remembered for as long as the object lives. Profiled on a 200-message session (bench/scenarios/session.ts,
 * a 33 KB prompt), `JSON.stringify` of the whole body was the gateway's largest single cost, ~80 µs a request measured
 * alone and 160 µs profiled under load; with the history's JSON remembered, only the new messages are serialised.
 * The result is the same JSON value as `JSON.stringify({...fields, messages})` (keys in another order).
 */
import type { ChatMessage } from '../types.js'

const remembered = new WeakMap<ChatMessage, string>()

/** The body, and where in it the `messages` array's JSON starts (it ends one character before the body does). */
export function upstreamBody(fields: Readonly<Record<string, unknown>>, messages: readonly ChatMessage[]): { json: string; messagesAt: number } {
  // The client's own `messages` is dropped (undefined is not serialised); a spread defines properties, so even a
  // `__proto__` field stays a field. Spread only when there is one to drop: a spread followed by a key the object does
  // not have (the Responses bridge's fields have none) takes V8's slow path, ≈ 0.4 µs hot (an override does not).
  const head = JSON.stringify(Object.hasOwn(fields, 'messages') ? { ...fields, messages: undefined } : fields)
  let out = head.length > 2 ? `${head.slice(0, -1)},"messages":` : '{"messages":'
  const messagesAt = out.length
  out += '['
  for (let i = 0; i < messages.length; i++) {
    if (i > 0) out += ','
    out += messageJson(messages[i] as ChatMessage)
  }
  return { json: `${out}]}`, messagesAt }
}

/** The `messages` array of a body `upstreamBody` made, as JSON (a slice of it: no copy until it is written). */
export function messagesJsonOf(body: { json: string; messagesAt: number }): string {
  return body.json.slice(body.messagesAt, -1)
}

/**
 * The whole message, every field as the client sent it (tool calls, parts, fields we do not know): the upstream sees
 * a saved message exactly as the client did.
 */
export function messageJson(m: ChatMessage): string {
  let json = remembered.get(m)
  if (json !== undefined) return json
  json = JSON.stringify(m)
  // Only an immutable message can keep its JSON: a request's own messages are new objects every time anyway.
  if (Object.isFrozen(m)) remembered.set(m, json)
  return json
}
