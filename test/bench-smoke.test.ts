/**
 * The demo and the load-testing kit actually run: `npm run demo`'s script against its own mock and gateway, and
 * `recallgate bench` against a real gateway and mock on loopback. Short runs bounded by request count, no timing
 * assertions (the benchmark suite itself is `npm run bench`, never run by CI).
 */
import { PassThrough } from 'node:stream'
import t from 'tap'
import { runDemo } from '../bench/demo.js'
import { Pool } from 'undici'
import { chatRequest, run as bench, runLoad } from '../src/cli/bench.js'
import { capturedIo } from './helpers/captured-io.js'
import { KEY_A, KEY_FREE, startHarness } from './helpers/harness.js'

function capture() {
  const io = capturedIo()
  return { io, out: io.out, err: io.err }
}

t.test('the demo shows memory, retrieval and a stream, then shuts down', async (t) => {
  const out = new PassThrough()
  let text = ''
  out.on('data', (d: Buffer) => (text += d.toString('utf8')))
  await runDemo(out)
  t.match(text, /"historyMessages":2/, 'the follow-up carried the first exchange')
  t.match(text, /201 \{"id":"file-/, 'the upload was processed')
  t.match(text, /"resultsFound":[1-9]/, 'retrieval found the uploaded file')
  t.match(text, /user\s+Excerpts from the user's files/, 'the excerpts went upstream as a user message')
  t.match(text, /reply: {5}Sintra is 40 minutes by train/, 'the streamed reply was printed whole')
  t.match(text, /6 messages saved/)
  t.match(text, /Done: everything shut down/)
})

t.test('recallgate bench drives a gateway and reports throughput, latency and first-chunk time', async (t) => {
  const h = await startHarness(t, { env: { LOG_LEVEL: 'warn' } })
  const common = ['--url', h.gw.url, '--key', KEY_A, '--provider-key', 'sk-or-x', '--model', 'openai/gpt-4o', '--warmup', '0', '--no-rag']

  const plain = capture()
  t.equal(await bench([...common, '--connections', '4', '--requests', '40'], plain.io), 0, plain.err())
  t.match(plain.out(), /recallgate bench: 4 connections, [\d.]+ s, non-stream → http:\/\/127\.0\.0\.1:\d+/)
  t.match(plain.out(), /requests {3}40 in [\d.]+ s: [\d.]+ req\/s succeeded, 0 failed/)
  t.match(plain.out(), /latency {4}p50 [\d.]+ ms {3}p90 [\d.]+ ms {3}p99 [\d.]+ ms/)
  t.match(plain.out(), /outcomes {3}200 ×40/)
  t.notMatch(plain.out(), /1st chunk/, 'no first-chunk line without --stream')
  const chats = h.mock.requests.filter((r) => r.path === '/api/v1/chat/completions')
  t.equal(chats.length, 40, 'every request reached the upstream through the gateway')
  t.same(Object.keys(chats[0]?.body as object).sort(), ['messages', 'model'], 'useRAG stripped, nothing else added')

  const streamed = capture()
  t.equal(await bench([...common, '--stream', '--connections', '2', '--requests', '10', '--json'], streamed.io), 0, streamed.err())
  const json = JSON.parse(streamed.out()) as { ok: number; failed: number; rps: number; latencyMs: { p50: number }; ttftMs: { n: number; p50: number } }
  t.equal(json.ok, 10)
  t.equal(json.failed, 0)
  t.equal(json.ttftMs.n, 10, 'a first-chunk time for every stream')
  t.ok(json.ttftMs.p50 > 0 && json.ttftMs.p50 <= json.latencyMs.p50, 'the first chunk comes before the end of the stream')
})

t.test('the first-output mark of a stream can be a pattern: the first chunk with text, not the role chunk before it', async (t) => {
  const h = await startHarness(t, { env: { LOG_LEVEL: 'warn' } })
  const pool = new Pool(h.gw.url)
  t.teardown(() => pool.close())
  const request = chatRequest({ basePath: '/api/v1', serviceKey: KEY_A, providerKey: 'sk-or-x', body: { model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'hi' }], stream: true, useRAG: false } })
  const firstText = { first: /"content":"[^"]/, done: 'data: [DONE]' }
  const text = await runLoad(pool, { ...request, marks: firstText }, { connections: 1, requests: 3 })
  t.equal(text.ttftMs.length, 3, 'a reply with text: timed at its first text')
  // A reply that is only a tool call has a role chunk (`"content":""`) and no text: the pattern never matches it.
  h.mock.setDefault({ toolCalls: [{ name: 'lookup', arguments: '{"q":"a"}' }] })
  const calls = await runLoad(pool, { ...request, marks: firstText }, { connections: 1, requests: 3 })
  t.equal(calls.ok, 3)
  t.equal(calls.ttftMs.length, 0, 'no text, no first-text time')
  const anyEvent = await runLoad(pool, request, { connections: 1, requests: 3 })
  t.equal(anyEvent.ttftMs.length, 3, 'the default mark is the first event, whatever it holds')
})

t.test('recallgate bench reports failures and exits 1; bad flags exit 2', async (t) => {
  const h = await startHarness(t, { env: { LOG_LEVEL: 'warn' } })
  // The free plan allows 10 requests a minute: the rest are 429s, which the report must show rather than hide.
  const limited = capture()
  const args = ['--url', h.gw.url, '--key', KEY_FREE, '--connections', '1', '--requests', '15', '--warmup', '0']
  t.equal(await bench(args, limited.io), 1)
  t.match(limited.out(), /outcomes {3}200 ×1\d, 429 ×\d|outcomes {3}429 ×\d+, 200 ×\d+/)
  t.match(limited.out(), /[1-9]\d* failed/)

  const badKey = capture()
  t.equal(await bench(['--url', h.gw.url, '--key', 'sk-not-a-key', '--requests', '3', '--warmup', '0'], badKey.io), 1)
  t.match(badKey.out(), /outcomes {3}401 ×3/)
  t.match(badKey.err(), /every request failed/)

  const usage = capture()
  t.equal(await bench(['--url', h.gw.url, '--key', KEY_A, '--connections', '0'], usage.io), 2)
  t.match(usage.err(), /--connections must be between 1 and 10000/)
  const noKey = capture()
  t.equal(await bench(['--url', h.gw.url], noKey.io), 2)
  t.match(noKey.err(), /service key is required/)
})
