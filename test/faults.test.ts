/**
 * Faults on either side of the gateway, through real sockets.
 *
 * Upstream: refused, reset (before headers / mid-body), 5xx, invalid JSON, invalid SSE, hung (before headers /
 * mid-body), an error event mid-stream. Each ends in a clean error for the client: the OpenAI error body while nothing
 * has been sent, else a final SSE `data: {"error":…}` event and a close without `[DONE]` (which the openai SDK turns
 * into a thrown APIError); within the configured timeout; with the upstream response and socket released; and
 * nothing saved to the session.
 *
 * Client: leaving before the upstream answered, mid-stream, and mid-upload releases the upstream and the request;
 * a client that dribbles its headers or body is cut off at the configured timeout without holding anyone else up.
 *
 * On every store engine (LMDB, and PostgreSQL when the test cluster is there): nothing saved is asked of the store.
 */
import t from 'tap'
import OpenAI from 'openai'
import { connect, createServer, type Socket } from 'node:net'
import { once } from 'node:events'
import { loadConfig } from '../src/config.js'
import type { MockBehaviour, MockUpstream } from '../src/mock-upstream.js'
import { KEY_A, startHarness, type Harness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'

/** Bounded polling for something that happens on another socket; false if it did not within `limitMs` (a ceiling for a
 * loaded machine, not a timing assertion: 3 s was not enough under load). */
async function until(cond: () => boolean, limitMs = 60_000): Promise<boolean> {
  const end = Date.now() + limitMs
  while (!cond()) {
    if (Date.now() > end) return false
    await new Promise((r) => setTimeout(r, 5))
  }
  return true
}

/**
 * The upstream side is clean: no response in flight (a hung or aborted one counts until the gateway drops it), and
 * no more sockets than the pool's idle keep-alive ones (two here: a chat and a concurrent /models lookup).
 */
async function released(mock: MockUpstream): Promise<boolean> {
  return until(() => mock.activeResponses() === 0 && mock.openConnections() <= 2)
}

const chatBody = (sessionId: string, stream: boolean) =>
  JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'tell me something long' }], sessionId, stream, useRAG: false })

const post = (h: Harness, body: string, signal?: AbortSignal) =>
  h.fetch('/api/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body, ...(signal ? { signal } : {}) })

interface Fault {
  name: string
  behaviour: MockBehaviour
  stream: boolean
  /** Before any byte went to the client: the HTTP status and code. After: the code of the final SSE error event. */
  status: number
  code: string
  /**
   * The upstream does this to every request while the fault lasts, not only to the next one: a connection dropped
   * before any answer is sent once more when it was a kept-alive one (the keep-alive race, test/upstream-client.test.ts),
   * so a drop that reaches the client is one that happens again.
   */
  every?: true
}

// Small upstream timeouts; undici's timers are coarse (a 400 ms timeout fires within ~1 s).
const TIMEOUT_MS = 400
const FAULTS: Fault[] = [
  { name: 'reset before headers', behaviour: { reset: 'before-headers' }, stream: false, status: 502, code: 'upstream_unreachable', every: true },
  { name: 'reset before headers', behaviour: { reset: 'before-headers' }, stream: true, status: 502, code: 'upstream_unreachable', every: true },
  { name: 'reset mid-body', behaviour: { reset: 'mid-stream' }, stream: false, status: 502, code: 'upstream_unreachable' },
  { name: 'reset mid-stream', behaviour: { reset: 'mid-stream' }, stream: true, status: 200, code: 'upstream_unreachable' },
  { name: 'upstream 500', behaviour: { status: 500 }, stream: false, status: 502, code: 'upstream_error' },
  { name: 'upstream 500', behaviour: { status: 500 }, stream: true, status: 502, code: 'upstream_error' },
  { name: 'upstream 503', behaviour: { status: 503 }, stream: true, status: 503, code: 'service_unavailable' },
  { name: 'invalid JSON', behaviour: { invalidJson: true }, stream: false, status: 502, code: 'upstream_invalid_response' },
  { name: 'invalid SSE', behaviour: { invalidSse: true }, stream: true, status: 200, code: 'upstream_invalid_response' },
  { name: 'hang before headers', behaviour: { hang: 'before-headers' }, stream: false, status: 504, code: 'upstream_timeout' },
  { name: 'hang before headers', behaviour: { hang: 'before-headers' }, stream: true, status: 504, code: 'upstream_timeout' },
  { name: 'hang mid-body', behaviour: { hang: 'mid-stream' }, stream: false, status: 504, code: 'upstream_timeout' },
  { name: 'hang mid-stream', behaviour: { hang: 'mid-stream' }, stream: true, status: 200, code: 'upstream_timeout' },
  { name: 'error event mid-stream', behaviour: { midStreamError: { afterChunks: 2, message: 'Provider went away' } }, stream: true, status: 200, code: '502' },
]

for (const engine of testableEngines(t, 'faults on either side')) {
  t.test(`${engine.name}: upstream faults: a clean error, in time, nothing leaked, nothing saved`, async (t) => {
    const warnings: string[] = []
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`)
    process.on('warning', onWarning)
    t.teardown(() => void process.off('warning', onWarning))
    const healthy: MockBehaviour = { reply: 'a reply long enough to come in several chunks', chunkChars: 5 }
    // A database pool of two (PostgreSQL; LMDB ignores it): its connections open as the work needs them, so the bound
    // below allows for them opening after the healthy exchange, and no more.
    const env = { UPSTREAM_HEADERS_TIMEOUT_MS: String(TIMEOUT_MS), UPSTREAM_BODY_TIMEOUT_MS: String(TIMEOUT_MS), DATABASE_POOL_SIZE: '2' }
    const h = await startHarness(t, { engine, env, mock: { behaviour: healthy } })
    // What one healthy exchange leaves open: the test client's keep-alive socket to the gateway (both ends), the
    // gateway's pooled sockets to the mock and, on PostgreSQL, its pool's connections to the database.
    const held = (kind: string) => process.getActiveResourcesInfo().filter((r) => r === kind).length
    t.equal((await (await post(h, chatBody('fault-baseline', false))).text()).length > 0, true, 'a healthy exchange first')
    const baseline = held('TCPSocketWrap')
    for (const [i, f] of FAULTS.entries()) {
      const label = `${f.name} (${f.stream ? 'stream' : 'JSON'})`
      const sessionId = `fault-${i}`
      if (f.every) h.mock.setDefault({ ...healthy, ...f.behaviour })
      else h.mock.enqueue(f.behaviour)
      const r = await post(h, chatBody(sessionId, f.stream))
      h.mock.setDefault(healthy)
      const text = await r.text()
      t.equal(r.status, f.status, `${label}: status ${f.status}`)
      if (f.status !== 200) {
        t.match(JSON.parse(text), { error: { code: f.code, type: String, message: String, param: null } }, `${label}: OpenAI error body`)
      } else {
        const events = text.split('\n\n').filter((e) => e.startsWith('data: '))
        const last = JSON.parse((events.at(-1) ?? 'data: null').slice(6)) as { error?: { code?: unknown } } | null
        t.equal(String(last?.error?.code), f.code, `${label}: ends with an SSE error event`)
        t.notMatch(text, /\[DONE\]/, `${label}: no [DONE]`)
      }
      // A hang ends by the gateway's own timeout: its code says so (upstream_timeout above), not how long it took.
      t.ok(await released(h.mock), `${label}: upstream response and socket released`)
      t.equal((await h.fetch(`/api/v1/sessions/${sessionId}`)).status, 404, `${label}: nothing saved`)
    }

    // Nothing accumulates per fault: after fourteen of them the process holds what one healthy exchange left open, give
    // or take a connection or two the pools may open meanwhile (a leak per fault would be fourteen).
    t.ok(held('TCPSocketWrap') <= baseline + 2, `${held('TCPSocketWrap')} sockets open after ${FAULTS.length} faults (${baseline} after one healthy exchange)`)
    t.ok(held('Timeout') <= 4, `${held('Timeout')} timers pending after ${FAULTS.length} faults`)
    t.same(warnings, [], 'no process warnings (e.g. MaxListenersExceeded from listeners piling up)')

    // The openai SDK reads each mid-stream failure as an error, never as a finished reply.
    for (const behaviour of [{ reset: 'mid-stream' }, { invalidSse: true }, { hang: 'mid-stream' }] as MockBehaviour[]) {
      h.mock.enqueue(behaviour)
      const stream = await h.client().chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x' }], stream: true })
      const err = await (async () => {
        for await (const _ of stream) void _
      })().catch((e: unknown) => e)
      t.type(err, OpenAI.APIError, `SDK throws for ${JSON.stringify(behaviour)}`)
    }
    t.ok(await released(h.mock))

    // Connection refused: a port nothing listens on.
    const probe = createServer().listen(0, '127.0.0.1')
    await once(probe, 'listening')
    const closedPort = (probe.address() as { port: number }).port
    await new Promise((r) => probe.close(r))
    await h.restart({ UPSTREAM_BASE_URL: `http://127.0.0.1:${closedPort}/api/v1` })
    for (const stream of [false, true]) {
      const r = await post(h, chatBody('refused', stream))
      t.equal(r.status, 502, `refused (${stream ? 'stream' : 'JSON'}) → 502`)
      t.match(await r.json(), { error: { code: 'upstream_unreachable', message: /ECONNREFUSED/ } })
    }
    t.equal((await h.fetch('/api/v1/sessions/refused')).status, 404)
  })

  t.test(`${engine.name}: the keep-alive race: a pooled connection the upstream closed under a request costs the client nothing`, async (t) => {
    const h = await startHarness(t, { engine })
    const retries = async (): Promise<number> =>
      Number(/^recallgate_upstream_retries_total (\d+)$/m.exec(await (await h.fetch('/metrics', { key: null, provider: null })).text())?.[1] ?? NaN)
    t.equal(await retries(), 0, 'exported at 0 before any')
    for (const stream of [false, true]) {
      t.equal((await post(h, chatBody(`race-${String(stream)}`, stream))).status, 200, 'a first exchange leaves a kept-alive connection')
      const before = h.mock.requests.length
      h.mock.enqueue({ reset: 'before-headers' })
      const r = await post(h, chatBody(`race-${String(stream)}`, stream))
      t.equal(r.status, 200, `answered (${stream ? 'stream' : 'JSON'})`)
      t.match(await r.text(), stream ? /\[DONE\]/ : /"choices"/)
      t.equal(h.mock.requests.length - before, 2, 'the dropped request was sent once more')
      t.equal(((await (await h.fetch(`/api/v1/sessions/race-${String(stream)}`)).json()) as { messages: unknown[] }).messages.length, 4, 'saved once')
    }
    t.equal(await retries(), 2, 'each retry counted in /metrics')
  })

  /** The gateway's request log lines for `route` with `status`, written so far. */
  const logged = (h: Harness, route: string, status: number): number =>
    h.logs().split('\n').filter((l) => l.includes(`"route":"${route}"`) && l.includes(`"status":${status}`)).length

  t.test(`${engine.name}: client aborts at every stage release the upstream and the request`, async (t) => {
    const h = await startHarness(t, { engine, mock: { behaviour: { reply: 'never seen' } } })

    for (const [i, stream] of [false, true].entries()) {
      // Before headers: the upstream is still "thinking" when the client leaves.
      h.mock.enqueue({ ttftMs: 60_000 })
      const ac = new AbortController()
      const seen = h.mock.requests.length
      const pending = post(h, chatBody(`abort-early-${stream}`, stream), ac.signal).catch((e: unknown) => e)
      t.ok(await until(() => h.mock.activeResponses() === 1 && h.mock.requests.length > seen), 'the upstream call is under way')
      ac.abort()
      t.type(await pending, Error, 'the client saw its own abort')
      t.ok(await released(h.mock), `before headers (${stream ? 'stream' : 'JSON'}): the upstream call was cancelled`)
      t.ok(await until(() => logged(h, '/api/v1/chat/completions', 499) === i + 1), 'the request ended, logged as client_closed_request (499)')
      t.equal((await h.fetch(`/api/v1/sessions/abort-early-${stream}`)).status, 404, 'nothing saved')
    }

    // Mid-stream: the upstream has sent its first chunk and then goes quiet.
    h.mock.enqueue({ hang: 'mid-stream' })
    const ac = new AbortController()
    const r = await post(h, chatBody('abort-mid', true), ac.signal)
    const reader = (r.body as ReadableStream<Uint8Array>).getReader()
    await reader.read()
    t.equal(h.mock.activeResponses(), 1, 'upstream stream open')
    ac.abort()
    await reader.cancel().catch(() => undefined)
    t.ok(await released(h.mock), 'mid-stream: the upstream stream was closed')
    t.equal((await h.fetch('/api/v1/sessions/abort-mid')).status, 404, 'nothing saved')

    // Mid-upload, multipart and JSON: half a body, then the socket goes away.
    for (const [type, head] of [
      ['multipart/form-data; boundary=XB', '--XB\r\nContent-Disposition: form-data; name="file"; filename="half.txt"\r\nContent-Type: text/plain\r\n\r\nthe first half of a file'],
      ['application/json', '{"filename":"half.txt","content":"the first half of'],
    ] as const) {
      const s: Socket = connect(h.gw.port, '127.0.0.1')
      await once(s, 'connect')
      // `Expect: 100-continue`: node answers 100 as it hands the request to the gateway's handler, so once it arrives
      // the upload is under way; then half a body, and the client vanishes.
      s.write(`POST /api/v1/files HTTP/1.1\r\nHost: x\r\nserviceKey: ${KEY_A}\r\nContent-Type: ${type}\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n`)
      const [first] = (await once(s, 'data')) as [Buffer]
      t.match(first.toString(), /^HTTP\/1\.1 100 Continue/)
      s.write(head)
      s.destroy()
      await once(s, 'close')
    }
    t.ok(await until(() => logged(h, '/api/v1/files', 499) === 2), 'both aborted uploads ended (client_closed_request), none left hanging')
    t.same(((await (await h.fetch('/api/v1/files')).json()) as { data: unknown[] }).data, [], 'no partial file was kept')
    t.notMatch(h.logs(), /"level":"error"/, 'a client leaving is not a server error')
    t.equal((await h.fetch('/healthz')).status, 200)
  })

  t.test(`${engine.name}: slow clients are cut off at the configured timeouts and hold no one up`, async (t) => {
    t.throws(() => loadConfig({ HEADERS_TIMEOUT_MS: '2000', REQUEST_TIMEOUT_MS: '1000' }), /HEADERS_TIMEOUT_MS/, 'headers timeout > request timeout is a config error')
    const HEADERS_MS = 300
    const REQUEST_MS = 600
    const h = await startHarness(t, {
      engine,
      env: { HEADERS_TIMEOUT_MS: String(HEADERS_MS), REQUEST_TIMEOUT_MS: String(REQUEST_MS) },
      mock: { behaviour: { reply: 'a stream that outlives the request timeout', chunkChars: 2, interChunkDelayMs: 40 } },
    })

    /**
     * Connect, write `head` at once, then `bytes` one at a time every 20 ms; resolve, once the server closed, with
     * what came back and how many of `bytes` were written by then.
     */
    const dribble = (bytes: string, head = '') =>
      new Promise<{ text: string; wrote: number }>((resolve) => {
        const s = connect(h.gw.port, '127.0.0.1')
        let text = ''
        let i = 0
        if (head !== '') s.write(head)
        const timer = setInterval(() => {
          if (i < bytes.length && s.writable) s.write(bytes[i++] as string)
        }, 20)
        s.setEncoding('utf8').on('data', (d: string) => (text += d))
        s.on('error', () => undefined)
        s.on('close', () => {
          clearInterval(timer)
          resolve({ text, wrote: i })
        })
      })

    const headers = 'GET /api/v1/models HTTP/1.1\r\nHost: x\r\nX-Padding: ' + 'p'.repeat(200) + '\r\n\r\n'
    const body = JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x'.repeat(100) }], useRAG: false })
    const postHead = `POST /api/v1/chat/completions HTTP/1.1\r\nHost: x\r\nserviceKey: ${KEY_A}\r\nAuthorization: Bearer x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`
    const slow = [dribble(headers), dribble(headers), dribble(headers)]
    // Headers at once, then the body byte by byte.
    const slowPost = dribble(body, postHead)

    // While they dribble, everyone else is served at once, including a stream that runs past REQUEST_TIMEOUT_MS.
    const t0 = Date.now()
    t.equal((await h.fetch('/healthz')).status, 200)
    t.ok(Date.now() - t0 < HEADERS_MS, 'a normal request is not held up by the slow ones')
    const stream = await h.fetch('/api/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x' }], stream: true, useRAG: false }) })
    const streamed = await stream.text()
    t.ok(Date.now() - t0 > REQUEST_MS, 'the stream lasted longer than the request timeout…')
    t.match(streamed, /data: \[DONE\]\n\n$/, '…and was not cut: the timeout covers receiving the request, not the response')

    for (const r of await Promise.all(slow)) {
      t.match(r.text, /^HTTP\/1\.1 408 /, 'dribbled headers → 408')
      t.match(JSON.parse(r.text.slice(r.text.indexOf('\r\n\r\n') + 4)), { error: { code: 'request_timeout', type: 'invalid_request_error' } })
      t.ok(r.wrote < headers.length, 'cut off before the headers were complete')
    }
    const p = await slowPost
    t.match(p.text, /^HTTP\/1\.1 408 /, 'dribbled body → 408')
    t.match(p.text, /"code":"request_timeout"/)
    t.ok(p.wrote < body.length, 'cut off before the body was complete')
    t.ok(await until(() => logged(h, '/api/v1/chat/completions', 408) === 1), 'logged as a 408 under its route')
    t.equal(h.mock.requests.filter((r) => r.path.endsWith('/chat/completions')).length, 1, 'only the complete request reached the upstream')
  })
}
