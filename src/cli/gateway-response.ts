/**
 * Reading a running gateway's answers in the CLI commands (ingest, sessions export, bench): a bounded read of a
 * response, the reason to show for a failed one, the most specific cause of a failed fetch, and Retry-After.
 */
import type { Response } from 'undici'
import type { Ms } from '../types.js'

const MAX_RETRY_WAIT: Ms = 60_000
/** Responses are small JSON records; anything longer is cut, not buffered. */
const MAX_RESPONSE_BYTES = 64 * 1024

/** The most specific thing known about a failed fetch: the socket error's code, else its cause's message. */
export function networkError(err: unknown): { code: string | undefined; text: string } {
  // undici's fetch throws TypeError('fetch failed') with the real error (ECONNREFUSED, 'bad port', …) as its cause.
  const cause = (err as { cause?: unknown } | undefined)?.cause
  const code = (cause as { code?: unknown } | undefined)?.code
  if (typeof code === 'string') return { code, text: code }
  if (cause instanceof Error) return { code: undefined, text: cause.message }
  return { code: undefined, text: err instanceof Error ? err.message : String(err) }
}

export async function readBounded(res: Response): Promise<string> {
  if (res.body === null) return ''
  const parts: Buffer[] = []
  let size = 0
  for await (const chunk of res.body as ReadableStream<Uint8Array>) {
    parts.push(Buffer.from(chunk))
    size += chunk.byteLength
    if (size >= MAX_RESPONSE_BYTES) {
      await res.body.cancel()
      break
    }
  }
  return Buffer.concat(parts).subarray(0, MAX_RESPONSE_BYTES).toString('utf8')
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined // not JSON: the caller falls back to the status line
  }
}

export function errorReason(status: number, text: string): string {
  const err = (parseJson(text) as { error?: { message?: unknown; code?: unknown } } | undefined)?.error
  if (typeof err?.message === 'string') return `${status}${typeof err.code === 'string' ? ` ${err.code}` : ''}: ${err.message}`
  const snippet = text.trim().slice(0, 200)
  return snippet === '' ? `HTTP ${status}` : `HTTP ${status}: ${snippet}`
}

/** Retry-After in seconds or as an HTTP date; a missing or odd value waits one second. Capped at a minute. */
export function retryAfter(header: string | null, nowMs: number = Date.now()): Ms {
  if (header === null) return 1000
  const wait = /^\d+$/.test(header.trim()) ? Number(header) * 1000 : Date.parse(header) - nowMs
  return Number.isFinite(wait) ? Math.min(MAX_RETRY_WAIT, Math.max(1000, wait)) : 1000
}
