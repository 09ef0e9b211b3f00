/**
 * Per-tenant quotas by plan (issue 29), end to end: a free-plan key with small quotas fills each one through the API
 * and gets 403 `quota_exceeded` naming the quota, its limit and its use, before anything is written (and, for a new
 * session, before the upstream is called); GET /api/v1/usage reports each quota's limit and use; deleting makes room.
 * On every store engine (LMDB, and PostgreSQL when the test cluster is there); the figures themselves are also the
 * store contract's (test/store-conformance.test.ts).
 */
import OpenAI from 'openai'
import t from 'tap'
import { KEY_A, KEY_FREE, startHarness, type Harness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'
import { uploadJson, uploadMultipart } from './helpers/uploads.js'

const QUOTAS = {
  QUOTA_FILES: 'free:2',
  QUOTA_STORED_BYTES: 'free:3000',
  QUOTA_SESSIONS: 'free:2',
  QUOTA_SESSION_MESSAGES: 'free:4',
  // The free plan's 10 requests a minute would be the first limit these tests meet.
  RATE_LIMITS: 'free:1000',
}

interface WireError {
  error: { message: string; type: string; param: string | null; code: string | null }
}

const upload = (h: Harness, filename: string, content: string) => uploadJson(h, { filename, content }, { key: KEY_FREE })

async function quotas(h: Harness, key = KEY_FREE): Promise<Record<string, { limit: number | null; used: number }>> {
  const r = await h.fetch('/api/v1/usage', { key })
  const body = (await r.json()) as { plan: string; quotas: Record<string, { limit: number | null; used: number }> }
  return body.quotas
}

for (const engine of testableEngines(t, 'per-tenant quotas')) {
  t.test(`${engine.name}: files and stored bytes: refused before storing, with the quota named, its limit and use; a delete makes room`, async (t) => {
    const h = await startHarness(t, { engine, env: QUOTAS })
    const first = await upload(h, 'a.txt', 'alpha '.repeat(200))
    t.equal(first.status, 201)
    const { id } = (await first.json()) as { id: string }

    const big = await upload(h, 'big.txt', 'x '.repeat(1000))
    t.equal(big.status, 403, 'over the bytes left')
    t.same(await big.json(), {
      error: {
        message:
          'Quota stored_bytes exceeded: your plan allows 3000 bytes and 1200 bytes are in use, and this request adds 2000 bytes; delete files (DELETE /api/v1/files/{id}) to make room',
        type: 'insufficient_quota',
        param: 'file',
        code: 'quota_exceeded',
      },
    })
    t.equal((await upload(h, 'b.txt', 'beta gamma delta')).status, 201)
    const third = await upload(h, 'c.txt', 'one more')
    t.equal(third.status, 403)
    t.match(((await third.json()) as WireError).error, { code: 'quota_exceeded', message: /^Quota files exceeded: your plan allows 2 and 2 are in use/ })

    const listed = (await (await h.fetch('/api/v1/files', { key: KEY_FREE })).json()) as { data: unknown[] }
    t.equal(listed.data.length, 2, 'nothing of the refused uploads was stored')
    t.same(await quotas(h), {
      stored_bytes: { limit: 3000, used: 1216 },
      files: { limit: 2, used: 2 },
      sessions: { limit: 2, used: 0 },
      messages_per_session: { limit: 4, used: 0 },
    })

    t.equal((await h.fetch(`/api/v1/files/${id}`, { key: KEY_FREE, method: 'DELETE' })).status, 200)
    t.equal((await upload(h, 'c.txt', 'one more')).status, 201, 'a delete makes room again')
    t.match(await quotas(h), { files: { limit: 2, used: 2 }, stored_bytes: { used: 24 } })
  })

  t.test(`${engine.name}: multipart uploads over the quota are refused before their body is read`, async (t) => {
    const h = await startHarness(t, { engine, env: { ...QUOTAS, QUOTA_FILES: 'free:1' } })
    t.equal((await upload(h, 'a.txt', 'alpha')).status, 201)
    const r = await uploadMultipart(h, { filename: 'big.txt', content: 'y'.repeat(1024 * 1024) }, { key: KEY_FREE })
    t.equal(r.status, 403)
    t.match(((await r.json()) as WireError).error, { code: 'quota_exceeded', param: 'file', message: /Quota files exceeded: your plan allows 1 and 1 are in use/ })
  })

  t.test(`${engine.name}: sessions: a chat that would start one session too many is refused before the upstream is called`, async (t) => {
    const h = await startHarness(t, { engine, env: QUOTAS })
    const client = h.client(KEY_FREE)
    const chat = (sessionId: string, content: string) =>
      client.chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content }], sessionId } as OpenAI.ChatCompletionCreateParamsNonStreaming)
    await chat('s-1', 'hello one')
    await chat('s-2', 'hello two')
    const calls = h.mock.requests.length
    const refused = await chat('s-3', 'hello three').catch((e: unknown) => e)
    t.type(refused, OpenAI.PermissionDeniedError, 'the SDK raises it at once (403 is not retried)')
    t.match(refused, {
      status: 403,
      code: 'quota_exceeded',
      type: 'insufficient_quota',
      param: 'sessionId',
      message: /Quota sessions exceeded: your plan allows 2 and 2 are in use, and this request adds 1; delete sessions/,
    })
    t.equal(h.mock.requests.length, calls, 'the upstream was not called')
    t.equal((await h.fetch('/api/v1/sessions/s-3', { key: KEY_FREE })).status, 404, 'nothing was saved')
    await chat('s-1', 'an existing session goes on')
    const noMemory = await client.chat.completions.create({
      model: 'openai/gpt-4o-mini',
      messages: [{ role: 'user', content: 'no memory' }],
      sessionId: 's-9',
      saveToMemory: false,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming)
    t.ok(noMemory.choices[0], 'a chat that saves nothing needs no session')
    t.match(await quotas(h), { sessions: { limit: 2, used: 2 } })

    // The conversations API makes sessions too: the same quota.
    const conv = await h.fetch('/api/v1/conversations', {
      key: KEY_FREE,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ items: [{ type: 'message', role: 'user', content: 'hi' }] }),
    })
    t.equal(conv.status, 403)
    t.match(((await conv.json()) as WireError).error, { code: 'quota_exceeded', message: /^Quota sessions exceeded/ })

    t.equal((await h.fetch('/api/v1/sessions/s-2', { key: KEY_FREE, method: 'DELETE' })).status, 200)
    await chat('s-3', 'room again')
    t.match(await quotas(h), { sessions: { limit: 2, used: 2 } })
  })

  t.test(`${engine.name}: messages per session: the oldest are pruned to the plan figure, and the largest session is reported`, async (t) => {
    const h = await startHarness(t, { engine, env: QUOTAS })
    const client = h.client(KEY_FREE)
    for (const content of ['one', 'two', 'three'])
      await client.chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content }], sessionId: 'long' } as OpenAI.ChatCompletionCreateParamsNonStreaming)
    const session = (await (await h.fetch('/api/v1/sessions/long', { key: KEY_FREE })).json()) as { messages: { role: string; content: string }[] }
    t.equal(session.messages.length, 4, 'four of the six messages kept')
    t.same(session.messages.filter((m) => m.role === 'user').map((m) => m.content), ['two', 'three'], 'the oldest went first')
    t.match(await quotas(h), { messages_per_session: { limit: 4, used: 4 }, sessions: { used: 1 } })
  })

  t.test(`${engine.name}: a plan without quotas reports them as null; another tenant counts only its own`, async (t) => {
    const h = await startHarness(t, { engine, env: QUOTAS })
    t.equal((await upload(h, 'a.txt', 'alpha')).status, 201)
    const r = await h.fetch('/api/v1/usage', { key: KEY_A })
    const body = (await r.json()) as { plan: string; quotas: unknown }
    t.equal(body.plan, 'unlimited')
    t.same(body.quotas, {
      stored_bytes: { limit: null, used: 0 },
      files: { limit: null, used: 0 },
      sessions: { limit: null, used: 0 },
      messages_per_session: { limit: null, used: 0 },
    })
  })
}
