/**
 * EMBEDDINGS=openai-compatible through the gateway (README, Knowledge base): uploads and chat questions are embedded
 * by the configured `/embeddings` endpoint (here a second mock, so its calls are told apart from the chat upstream's)
 * with its own model and key, never the caller's; a fact uploaded that way lands in the chat prompt. Restarted with
 * the local embedder, the tenant whose files were indexed by the other one is refused with `embedder_mismatch` until
 * its files are gone, while a tenant without files is not.
 */
import { once } from 'node:events'
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import OpenAI from 'openai'
import t, { type Test } from 'tap'
import { startMockUpstream } from '../src/mock-upstream.js'
import { KEY_A, KEY_B, startHarness, type Harness } from './helpers/harness.js'
import { uploadMultipart } from './helpers/uploads.js'

const EMBEDDING_KEY = 'sk-embeddings-provider-key-0001-Vq8Zr3Lw5Ym2'
const EMBEDDING_MODEL = 'acme/embed-small'

const upload = (h: Harness, filename: string, content: string, key = KEY_A): Promise<Response> =>
  uploadMultipart(h, { filename, content }, { key, provider: null })

async function search(h: Harness, query: string, key = KEY_A): Promise<Response> {
  return h.fetch('/api/v1/files/search', { method: 'POST', key, provider: null, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, k: 3 }) })
}

t.test('openai-compatible embedder: uploads and questions embedded by its endpoint; a later local embedder is refused for that tenant', async (t) => {
  const embeddings = await startMockUpstream({ embeddingDimensions: 48 })
  t.teardown(() => embeddings.close())
  const h = await startHarness(t, {
    env: { EMBEDDINGS: 'openai-compatible', EMBEDDINGS_BASE_URL: embeddings.url, EMBEDDINGS_MODEL: EMBEDDING_MODEL, EMBEDDINGS_API_KEY: EMBEDDING_KEY },
  })
  const calls = () => embeddings.requests.filter((r) => r.method === 'POST' && r.path === '/api/v1/embeddings')

  const up = await upload(h, 'harbour.txt', 'Harbour notes.\n\nThe harbour master of Port Quillon is named ODALRIC VANTE.\n\nTides are high at noon.')
  t.equal(up.status, 201)
  const file = (await up.json()) as { id: string }
  t.ok(calls().length >= 1, 'the chunks were embedded by the configured endpoint')
  for (const call of calls()) {
    t.match(call.body, { model: EMBEDDING_MODEL }, 'with EMBEDDINGS_MODEL')
    t.equal(call.headers.authorization, `Bearer ${EMBEDDING_KEY}`, 'and EMBEDDINGS_API_KEY, not the caller’s provider key')
  }
  t.equal(h.mock.requests.filter((r) => r.path === '/api/v1/embeddings').length, 0, 'nothing embedded through the chat upstream')

  const before = calls().length
  const res = await h.client().chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'Who is the harbour master of Port Quillon?' }] })
  t.ok(calls().length > before, 'the question was embedded by the same endpoint')
  const meta = (res as unknown as { _metadata: { rag: { sources: Array<{ file_id: string }> } } })._metadata
  t.equal(meta.rag.sources[0]?.file_id, file.id, 'the uploaded file is the source')
  const prompt = JSON.stringify(h.mock.lastChatBody())
  t.match(prompt, /ODALRIC VANTE/, 'its fact is in the prompt')
  t.notMatch(prompt, new RegExp(EMBEDDING_KEY), 'the embedding key never reaches the chat upstream')

  // Another embedder on the same data: tenant A's vectors are in another space.
  await h.restart({ EMBEDDINGS: 'local' })
  const refused = await upload(h, 'more.txt', 'More harbour notes about the lighthouse.')
  t.equal(refused.status, 400)
  const body = (await refused.json()) as { error: { code: string; type: string; message: string } }
  t.match(body.error, { code: 'embedder_mismatch', type: 'invalid_request_error' })
  t.match(body.error.message, /openai-compatible:acme\/embed-small/, 'the message names the embedder the files were indexed with')
  t.match(await search(h, 'harbour master'), { status: 400 }, 'search is refused too')
  const chat = await h
    .client()
    .chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'Who is the harbour master?' }] })
    .catch((e: unknown) => e)
  t.type(chat, OpenAI.BadRequestError, 'a chat with retrieval is refused with the same error')
  t.equal((chat as InstanceType<typeof OpenAI.BadRequestError>).code, 'embedder_mismatch')

  t.equal((await upload(h, 'b.txt', 'Tenant b keeps bees on the roof.', KEY_B)).status, 201, 'a tenant without files starts with the local embedder')

  const del = await h.fetch(`/api/v1/files/${file.id}`, { method: 'DELETE', provider: null })
  t.equal(del.status, 200)
  t.equal((await upload(h, 'more.txt', 'More harbour notes about the lighthouse.')).status, 201, 'once its files are gone, the tenant starts over')
  t.equal((await search(h, 'lighthouse')).status, 200)
})

/**
 * An /embeddings endpoint that answers at once until told to hold: then it records each held request and when its
 * socket closes, and never answers (the embedder's own timeout is 30 s).
 */
async function holdingEmbeddings(t: Test): Promise<{ url: string; hold(): void; held: Promise<IncomingMessage> }> {
  let holding = false
  let onHeld: (req: IncomingMessage) => void = () => undefined
  const held = new Promise<IncomingMessage>((resolve) => (onHeld = resolve))
  const server = createServer((req, res) => {
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (c: string) => (body += c))
    req.on('end', () => {
      if (holding) return onHeld(req)
      const { input } = JSON.parse(body) as { input: string[] }
      const data = input.map((text, index) => ({ index, embedding: Array.from({ length: 16 }, (_, i) => ((text.length + i) % 7) + 1) }))
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data }))
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, hold: () => (holding = true), held }
}

t.test('a client that leaves cancels the embedding call made for its retrieval', async (t) => {
  const embeddings = await holdingEmbeddings(t)
  const h = await startHarness(t, { env: { EMBEDDINGS: 'openai-compatible', EMBEDDINGS_BASE_URL: embeddings.url, EMBEDDINGS_MODEL: EMBEDDING_MODEL } })
  t.equal((await upload(h, 'harbour.txt', 'The harbour master of Port Quillon is named ODALRIC VANTE.')).status, 201)
  // The model list cached first, so that the chat below waits on the embedding and nothing else.
  t.equal((await h.fetch('/api/v1/models')).status, 200)

  embeddings.hold()
  const client = new AbortController()
  const chat = h
    .fetch('/api/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'Who is the harbour master of Port Quillon?' }] }),
      signal: client.signal,
    })
    .catch((err: unknown) => err)
  const req = await embeddings.held
  const closed = once(req.socket, 'close')
  const started = Date.now()
  client.abort()
  t.type(await chat, Error, 'the client gave up')
  // Bounded by the test's own deadline rather than the embedder's 30 s: the gateway drops the call when the client goes.
  const outcome = await Promise.race([closed.then(() => 'closed'), new Promise((r) => setTimeout(() => r('still open'), 5_000))])
  t.equal(outcome, 'closed', 'the embedding request was aborted')
  t.ok(Date.now() - started < 5_000, 'well before the endpoint would answer')
  t.equal(h.mock.requests.filter((r) => r.path === '/api/v1/chat/completions').length, 0, 'and nothing went upstream')
})
