/**
 * Embedders: the local one (deterministic, unit length, similar texts closer) and the OpenAI-compatible one against
 * a real HTTP server on 127.0.0.1 (request shape, batching, normalisation, every failure mapped to a gateway error).
 */
import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { LocalEmbedder } from '../src/retrieval/embedder.js'
import { analyze } from '../src/retrieval/analyzer.js'
import { codeTerms } from '../src/retrieval/chunk-terms.js'
import { Agent } from 'undici'
import { OpenAICompatibleEmbedder } from '../src/retrieval/openai-embedder.js'

const dot = (a: Float32Array, b: Float32Array): number => a.reduce((s, x, i) => s + x * (b[i] as number), 0)

t.test('local embedder: deterministic unit vectors; related texts are closer', async (t) => {
  const e = new LocalEmbedder()
  t.equal(e.id, `local:hash-v1:${e.dimension}`)
  const [a, b, c, a2] = await e.embed([
    'The Normans conquered England in 1066.',
    'When did the Norman conquest of England happen?',
    'Photosynthesis turns sunlight into sugar in plant leaves.',
    'The Normans conquered England in 1066.',
  ])
  t.same(a, a2, 'same text, same vector')
  t.ok(Math.abs(dot(a!, a!) - 1) < 1e-5, 'unit length')
  t.ok(dot(a!, b!) > dot(a!, c!) + 0.1, `related ${dot(a!, b!).toFixed(2)} > unrelated ${dot(a!, c!).toFixed(2)}`)
  const [empty] = await e.embed([''])
  t.ok(empty!.every((x) => x === 0), 'no terms → zero vector, not NaN')
  t.equal(new LocalEmbedder({ dimension: 512 }).id, 'local:hash-v1:512')
  t.throws(() => new LocalEmbedder({ dimension: 300 }), RangeError)
})

interface Seen {
  body: { model: string; input: string[] }
  auth: string | undefined
}

async function server(t: Test, handle: (req: IncomingMessage, body: string, res: ServerResponse) => void) {
  const seen: Seen[] = []
  const srv = createServer((req, res) => {
    let body = ''
    req.on('data', (c: Buffer) => (body += c.toString()))
    req.on('end', () => {
      try {
        seen.push({ body: JSON.parse(body) as Seen['body'], auth: req.headers.authorization })
      } catch {
        // Not JSON: the test inspects `seen` only for well-formed requests.
      }
      handle(req, body, res)
    })
  })
  srv.listen(0, '127.0.0.1')
  await once(srv, 'listening')
  t.teardown(() => {
    srv.closeAllConnections()
    srv.close()
  })
  return { url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}/v1`, seen }
}

const answer = (res: ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(typeof body === 'string' ? body : JSON.stringify(body))
}

t.test('property: a file\'s coded terms embed to the same vectors, bit for bit, as each chunk\'s terms', async (t) => {
  const word = fc.constantFrom('a', 'I', 'the', 'Normans', 'naïve', 'ΣΟΦΙΑ', '東京', '42', 'x'.repeat(70), 'b2', '..')
  await fc.assert(
    fc.asyncProperty(fc.array(fc.array(word, { maxLength: 40 }), { minLength: 1, maxLength: 20 }), fc.constantFrom(64, 256), async (chunks, dimension) => {
      const e = new LocalEmbedder({ dimension })
      const terms = chunks.map((words) => analyze(words.join(' ')))
      const want = await e.embedTerms(terms)
      const got = e.embedCoded(codeTerms(terms))
      return got.length === want.length && got.every((v, i) => Buffer.from(v.buffer).equals(Buffer.from((want[i] as Float32Array).buffer)))
    }),
    { numRuns: 200 },
  )
  t.pass('200 random files')
})

t.test('openai-compatible: POST /embeddings in batches, reordered by index, normalised', async (t) => {
  const { url, seen } = await server(t, (req, body, res) => {
    t.equal(req.url, '/v1/embeddings')
    t.equal(req.method, 'POST')
    const input = (JSON.parse(body) as { input: string[] }).input
    // Answer out of order with unnormalised vectors: [len, 1, 0].
    const data = input.map((s, index) => ({ object: 'embedding', index, embedding: [s.length, 1, 0] })).reverse()
    answer(res, 200, { object: 'list', data, model: 'm' })
  })
  const e = new OpenAICompatibleEmbedder({ baseUrl: `${url}/`, model: 'text-embedding-3-small', apiKey: 'sk-test', batchSize: 2 })
  t.equal(e.id, 'openai-compatible:text-embedding-3-small')
  t.equal(e.dimension, 0, 'unknown until the first answer')
  const out = await e.embed(['a', 'bbb', 'cc'])
  t.equal(e.dimension, 3)
  t.same(seen.map((s) => s.body.input), [['a', 'bbb'], ['cc']], 'two batches')
  t.equal(seen[0]?.body.model, 'text-embedding-3-small')
  t.equal(seen[0]?.auth, 'Bearer sk-test')
  t.equal(out.length, 3)
  t.ok(Math.abs((out[1]![0] as number) - 3 / Math.sqrt(10)) < 1e-6, 'second input, normalised')
  for (const v of out) t.ok(Math.abs(dot(v, v) - 1) < 1e-6)
})

t.test('openai-compatible: failures become 502/504 gateway errors with the reason', async (t) => {
  let mode = ''
  const { url } = await server(t, (_req, _body, res) => {
    if (mode === 'status') answer(res, 401, { error: { message: 'Invalid API key' } })
    else if (mode === 'html') answer(res, 200, '<html>oops</html>')
    else if (mode === 'count') answer(res, 200, { data: [{ index: 0, embedding: [1, 2] }] })
    else if (mode === 'nan') answer(res, 200, { data: [{ index: 0, embedding: [1, 'x'] }, { index: 1, embedding: [1, 2] }] })
    else if (mode === 'dims') answer(res, 200, { data: [{ index: 0, embedding: [1, 2] }, { index: 1, embedding: [1, 2, 3] }] })
    else if (mode === 'slow') setTimeout(() => answer(res, 200, { data: [] }), 2000).unref()
  })
  const e = (timeout = 5000) => new OpenAICompatibleEmbedder({ baseUrl: url, model: 'm', timeout })
  const cases: Array<[string, string, RegExp]> = [
    ['status', 'upstream_invalid_response', /401: Invalid API key/],
    ['html', 'upstream_invalid_response', /not JSON/],
    ['count', 'upstream_invalid_response', /1 vectors for 2 inputs/],
    ['nan', 'upstream_invalid_response', /not a list of numbers/],
    ['dims', 'upstream_invalid_response', /3 dimensions, expected 2/],
  ]
  for (const [m, code, message] of cases) {
    mode = m
    await t.rejects(e().embed(['a', 'b']), { code, status: 502, message }, m)
  }
  mode = 'slow'
  await t.rejects(e(100).embed(['a']), { code: 'upstream_timeout', status: 504 }, 'timeout')
  const closed = new OpenAICompatibleEmbedder({ baseUrl: 'http://127.0.0.1:1/v1', model: 'm' })
  await t.rejects(closed.embed(['a']), { code: 'upstream_unreachable', status: 502 }, 'connection refused')
  t.throws(() => new OpenAICompatibleEmbedder({ baseUrl: 'ftp://x', model: 'm' }), TypeError)
  t.throws(() => new OpenAICompatibleEmbedder({ baseUrl: url, model: '' }), TypeError)
})

t.test('openai-compatible: a connection the server dropped under a request is retried once, on a new one', async (t) => {
  // Each connection answers its first request; a second one sent on it is dropped unanswered (what a server that
  // closed the idle connection meanwhile looks like to the client). `always`: every request is dropped.
  let always = false
  const served = new WeakMap<object, number>()
  let requests = 0
  const { url } = await server(t, (req, body, res) => {
    requests++
    const n = (served.get(req.socket) ?? 0) + 1
    served.set(req.socket, n)
    if (always || n > 1) {
      req.socket.destroy()
      return
    }
    const input = (JSON.parse(body) as { input: string[] }).input
    answer(res, 200, { data: input.map((_, index) => ({ index, embedding: [1, index + 1] })) })
  })
  // One connection, so the second request goes on the first one's connection.
  const pool = new Agent({ connections: 1 })
  t.teardown(() => pool.close())
  const e = new OpenAICompatibleEmbedder({ baseUrl: url, model: 'm', dispatcher: pool })
  t.equal((await e.embed(['a'])).length, 1)
  t.equal((await e.embed(['b', 'c'])).length, 2, 'answered after the drop')
  t.equal(requests, 3, 'one request, then one dropped and one retried')
  always = true
  requests = 0
  await t.rejects(e.embed(['d']), { code: 'upstream_unreachable', status: 502 }, 'dropped twice: unreachable')
  t.equal(requests, 2, 'retried once, not more')
})
