/**
 * A stream that fails after its first byte (status 200 already sent) is not recorded as a success (issue 27): its
 * request line carries `streamFailure` and the error code, at `error` level unless the client left, and
 * `recallgate_stream_failures_total` counts it by reason. The mock upstream drops, stalls or errors a stream midway.
 */
import t from 'tap'
import type { MockBehaviour } from '../src/mock-upstream.js'
import { KEY_A, PROVIDER_KEY, startHarness, type Harness } from './helpers/harness.js'

interface RequestLine {
  level: string
  reqId: string
  status: number
  streamFailure?: string
  errorCode?: string
  errorMessage?: string
}

/** The request line logged for `reqId`, waited for: it is written when the response has closed. */
async function lineOf(h: Harness, reqId: string): Promise<RequestLine> {
  for (let i = 0; ; i++) {
    const line = h
      .logs()
      .split('\n')
      .filter((l) => l.includes('"msg":"request"'))
      .map((l) => JSON.parse(l) as RequestLine)
      .find((l) => l.reqId === reqId)
    if (line !== undefined) return line
    if (i === 400) throw new Error(`no request line for ${reqId} in the log`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

async function failures(h: Harness): Promise<Record<string, number>> {
  const text = await (await h.fetch('/metrics', { key: null, provider: null })).text()
  const out: Record<string, number> = {}
  for (const m of text.matchAll(/^recallgate_stream_failures_total\{reason="([a-z_]+)"\} (\d+)$/gm)) out[m[1] as string] = Number(m[2])
  return out
}

/** A streamed chat read to its end as raw text (the SSE body), with its request id. */
async function streamChat(h: Harness, signal?: AbortSignal): Promise<{ status: number; reqId: string; text: string }> {
  const r = await h.fetch('/api/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'openai/gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'Tell me a story' }] }),
    signal,
  })
  return { status: r.status, reqId: r.headers.get('x-request-id') ?? '', text: await r.text() }
}

t.test('a stream that fails midway is logged with its error code and counted in /metrics by reason', async (t) => {
  // A short body timeout, so a stalled stream fails soon (undici's timers are coarse: within about a second).
  const h = await startHarness(t, {
    env: { UPSTREAM_BODY_TIMEOUT_MS: '400' },
    mock: { behaviour: { reply: 'a reply long enough to come in several chunks', chunkChars: 5 } },
  })
  t.same(
    await failures(h),
    { upstream_reset: 0, upstream_timeout: 0, upstream_invalid: 0, upstream_error: 0, client_gone: 0, internal: 0 },
    'every reason is exported from the start, at 0',
  )

  const cases: Array<{ name: string; behaviour: MockBehaviour; reason: string; code: string; message: RegExp | 'none' }> = [
    { name: 'upstream reset', behaviour: { reset: 'mid-stream' }, reason: 'upstream_reset', code: 'upstream_unreachable', message: /could not be reached/ },
    { name: 'upstream stalls', behaviour: { hang: 'mid-stream' }, reason: 'upstream_timeout', code: 'upstream_timeout', message: /did not answer in time/ },
    { name: 'invalid SSE', behaviour: { invalidSse: true }, reason: 'upstream_invalid', code: 'upstream_invalid_response', message: /SSE|\[DONE\]/ },
    { name: "the upstream's error event", behaviour: { midStreamError: { afterChunks: 2, message: 'Provider went away' } }, reason: 'upstream_error', code: 'upstream_error', message: 'none' },
  ]
  const expected: Record<string, number> = { upstream_reset: 0, upstream_timeout: 0, upstream_invalid: 0, upstream_error: 0, client_gone: 0, internal: 0 }
  for (const c of cases) {
    h.mock.enqueue(c.behaviour)
    const r = await streamChat(h)
    t.equal(r.status, 200, `${c.name}: the stream had begun`)
    t.notMatch(r.text, /\[DONE\]/, `${c.name}: and did not complete`)
    const line = await lineOf(h, r.reqId)
    t.match(line, { level: 'error', status: 200, streamFailure: c.reason, errorCode: c.code }, `${c.name}: the request line says it failed`)
    if (c.message === 'none') t.notOk('errorMessage' in line, `${c.name}: not the upstream's own text (it may quote the request)`)
    else t.match(line.errorMessage, c.message, `${c.name}: with our message`)
    expected[c.reason] = (expected[c.reason] ?? 0) + 1
    t.same(await failures(h), expected, `${c.name}: counted as ${c.reason}`)
  }

  // The client leaves after the first chunk: counted, but logged at info (not the gateway's fault).
  h.mock.enqueue({ hang: 'mid-stream' })
  const ac = new AbortController()
  const r = await h.fetch('/api/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'openai/gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'Tell me a story' }] }),
    signal: ac.signal,
  })
  await (r.body as ReadableStream<Uint8Array>).getReader().read()
  ac.abort()
  const left = await lineOf(h, r.headers.get('x-request-id') ?? '')
  t.match(left, { level: 'info', status: 200, streamFailure: 'client_gone', errorCode: 'client_closed_request' })
  expected.client_gone = 1
  t.same(await failures(h), expected, 'the client leaving is counted as client_gone')

  // A stream that completes is neither.
  const ok = await streamChat(h)
  t.match(ok.text, /\[DONE\]/)
  const line = await lineOf(h, ok.reqId)
  t.notOk('streamFailure' in line || 'errorCode' in line, 'a completed stream has no failure or error code')
  t.equal(line.level, 'info')
  t.same(await failures(h), expected, 'and is not counted')

  // The openai SDK agrees with the log: the failed stream is an error to it too.
  h.mock.enqueue({ reset: 'mid-stream' })
  const stream = await h.client(KEY_A, { providerKey: PROVIDER_KEY }).chat.completions.create({ model: 'openai/gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'x' }] })
  const err = await (async () => {
    for await (const _ of stream) void _
  })().catch((e: unknown) => e)
  t.type(err, Error, 'the SDK raises the failure')
  expected.upstream_reset = (expected.upstream_reset ?? 0) + 1
  for (let i = 0; (await failures(h)).upstream_reset !== expected.upstream_reset; i++) {
    if (i === 200) throw new Error('the SDK-seen reset was never counted')
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  t.pass('counted as upstream_reset')
})
