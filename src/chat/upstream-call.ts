/**
 * One call to the upstream's chat completions, shared by the chat path and the Responses bridge: send the body,
 * time the headers, and turn a non-2xx answer into the registry's error (before a byte went to the client, so it
 * goes out as an HTTP error with the upstream's status and message, the caller's key cut out of it).
 */
import { gatewayError } from '../errors.js'
import type { RequestContext } from '../http/server.js'
import type { Bytes, Clock } from '../types.js'
import { readUpstreamBody, type UpstreamClient, type UpstreamResponse } from '../upstream/client.js'
import { upstreamHttpError, withoutSecret } from '../upstream/errors.js'

export interface UpstreamCall {
  response: UpstreamResponse
  /** When the body was sent (the clock's ms): what time to first token and upstream time are measured from. */
  sentAt: number
  /** The upstream answered with an event stream (a stream request can be answered with plain JSON). */
  eventStream: boolean
}

export async function callUpstream(
  upstream: UpstreamClient,
  ctx: RequestContext,
  body: string,
  o: { authorization: string; stream: boolean; clock: Clock; maxUpstreamBodyBytes: Bytes },
): Promise<UpstreamCall> {
  const sentAt = o.clock()
  const response = await upstream.chat(body, { authorization: o.authorization, signal: ctx.clientGone, stream: o.stream })
  ctx.facts.upstreamHeadersMs = o.clock() - sentAt
  if (response.status < 200 || response.status >= 300) {
    const text = withoutSecret(await readUpstreamBody(response.body, o.maxUpstreamBodyBytes), o.authorization)
    const ra = response.headers['retry-after']
    throw upstreamHttpError(response.status, text, typeof ra === 'string' ? ra : undefined)
  }
  const eventStream = String(response.headers['content-type'] ?? '').includes('text/event-stream')
  return { response, sentAt, eventStream }
}

/** A non-stream upstream body, read and parsed; the caller's key cut out of an error body that quotes it. */
export async function readCompletion(
  call: UpstreamCall,
  o: { authorization: string; maxUpstreamBodyBytes: Bytes },
): Promise<{ text: string; completion: Record<string, unknown> }> {
  const text = await readUpstreamBody(call.response.body, o.maxUpstreamBodyBytes)
  let completion: Record<string, unknown>
  try {
    const parsed: unknown = JSON.parse(text)
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object')
    completion = parsed as Record<string, unknown>
  } catch (err) {
    throw gatewayError('upstream_invalid_response', { message: 'The upstream response is not a JSON object', cause: err })
  }
  if (completion.error !== undefined && completion.choices === undefined) {
    // OpenRouter can answer 200 with an error body (e.g. a provider failure after routing): a 502 to the client.
    throw upstreamHttpError(call.response.status, withoutSecret(text, o.authorization))
  }
  return { text, completion }
}
