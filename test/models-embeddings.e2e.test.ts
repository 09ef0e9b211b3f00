/**
 * The rest of the OpenAI surface a client meets at the same base URL (issue 27, item 10): `models.retrieve` with an id
 * that contains `/` (sent URL-encoded) answered from the cached model list, and embeddings relayed to the upstream
 * with the caller's key, through the official SDK and LangChain's OpenAIEmbeddings.
 * On every store engine (LMDB, and PostgreSQL when the test cluster is there): the keys requests authenticate with,
 * and their usage and traces, are the store's.
 */
import { OpenAIEmbeddings } from '@langchain/openai'
import OpenAI from 'openai'
import t from 'tap'
import { KEY_A, PROVIDER_KEY, startHarness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'

for (const engine of testableEngines(t, 'models-embeddings')) {
  t.test(`${engine.name}: models.retrieve finds a model whose id has a slash, and a model the upstream does not list is a 404 in OpenAI shape`, async (t) => {
    const h = await startHarness(t, { engine })
    const client = h.client()
    const m = await client.models.retrieve('openai/gpt-4o')
    t.match(m, { id: 'openai/gpt-4o', context_length: 128000 }, "the upstream's own entry")
    const listCalls = h.mock.requests.filter((r) => r.path === '/api/v1/models').length
    await client.models.retrieve('anthropic/claude-3.5-sonnet')
    t.equal(h.mock.requests.filter((r) => r.path === '/api/v1/models').length, listCalls, 'answered from the cached list')

    const err = await client.models.retrieve('nobody/nothing').catch((e: unknown) => e)
    t.type(err, OpenAI.NotFoundError)
    const raw = await h.fetch(`/api/v1/models/${encodeURIComponent('nobody/nothing')}`)
    t.equal(raw.status, 404)
    t.same(await raw.json(), {
      error: { message: 'The model "nobody/nothing" does not exist', type: 'not_found_error', param: 'model', code: 'model_not_found' },
    })
    const noKey = await h.fetch(`/api/v1/models/${encodeURIComponent('openai/gpt-4o')}`, { key: null })
    t.equal(noKey.status, 401, 'a service key is needed, as for the list')
  })

  t.test(`${engine.name}: models.retrieve from a client that sends the id's slash as it is (the Python SDK's f"/models/{model}")`, async (t) => {
    const h = await startHarness(t, { engine })
    const plain = await h.fetch('/api/v1/models/openai/gpt-4o')
    t.equal(plain.status, 200)
    t.match(await plain.json(), { id: 'openai/gpt-4o', context_length: 128000 })
    const variant = await h.fetch('/api/v1/models/anthropic/claude-3.5-sonnet')
    t.match(await variant.json(), { id: 'anthropic/claude-3.5-sonnet' })
    const unknown = await h.fetch('/api/v1/models/nobody/nothing')
    t.equal(unknown.status, 404)
    t.match(await unknown.json(), { error: { param: 'model', code: 'model_not_found', message: 'The model "nobody/nothing" does not exist' } })
  })

  t.test(`${engine.name}: embeddings.create is relayed with the caller key, in both encodings, and its errors are the upstream ones`, async (t) => {
    const h = await startHarness(t, { engine })
    const client = h.client()
    const one = await client.embeddings.create({ model: 'openai/text-embedding-3-small', input: 'the quick brown fox' })
    t.equal(one.data.length, 1)
    t.equal(one.data[0]?.embedding.length, 64, "the SDK decoded the upstream's base64 vector")
    t.ok(one.usage.prompt_tokens > 0)
    const sent = h.mock.requests.filter((r) => r.path === '/api/v1/embeddings').at(-1)
    t.equal(sent?.headers.authorization, `Bearer ${PROVIDER_KEY}`, 'the caller Authorization is forwarded')
    t.notOk(h.logs().includes(PROVIDER_KEY), 'and never logged')

    const floats = await client.embeddings.create({ model: 'm', input: ['a', 'b'], encoding_format: 'float', dimensions: 8 })
    t.same(floats.data.map((d) => d.embedding.length), [8, 8])

    const missing = await h.fetch('/api/v1/embeddings', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm' }) })
    t.equal(missing.status, 400)
    t.match(await missing.json(), { error: { code: 'missing_parameter', param: 'input', type: 'invalid_request_error' } })
    t.equal(h.mock.requests.filter((r) => r.path === '/api/v1/embeddings').length, 2, 'a request we refuse never reaches the upstream')

    // Token arrays pass our check; the mock refuses them, as a provider without them would.
    const refused = await client.embeddings.create({ model: 'm', input: [[1, 2, 3]] }).catch((e: unknown) => e)
    t.type(refused, OpenAI.BadRequestError)
    t.match(refused, { status: 400, message: /Upstream returned 400: input must be/ }, "the upstream's status and message, saying it is the upstream's")

    const big = await h.restart({ MAX_BODY_BYTES: '2000' }).then(() =>
      h.fetch('/api/v1/embeddings', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'x'.repeat(5000) }) }),
    )
    t.equal(big.status, 413, 'the body is bounded by MAX_BODY_BYTES')
    t.match(await big.json(), { error: { code: 'payload_too_large' } })
  })

  t.test(`${engine.name}: LangChain's OpenAIEmbeddings pointed at the gateway embeds documents and a query`, async (t) => {
    const h = await startHarness(t, { engine })
    const embeddings = new OpenAIEmbeddings({
      model: 'openai/text-embedding-3-small',
      apiKey: PROVIDER_KEY,
      maxRetries: 0,
      configuration: { baseURL: `${h.gw.url}/api/v1`, defaultHeaders: { serviceKey: KEY_A } },
    })
    const docs = await embeddings.embedDocuments(['first document', 'second document'])
    t.equal(docs.length, 2)
    t.equal(docs[0]?.length, 64)
    const q = await embeddings.embedQuery('first document')
    t.same(q, docs[0], 'the same text embeds the same way')
  })
}
