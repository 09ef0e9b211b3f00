/**
 * Bad input to the chat endpoint, thrown by the thousand: property tests (fast-check) against one keep-alive gateway.
 * Whatever the body (wrong types, missing fields, hostile strings, truncated JSON, invalid UTF-8, deep nesting, wrong
 * content types), the answer is never a 5xx, always carries an x-request-id, and every error is OpenAI's shape with
 * `param` naming the field at fault. The files, sessions and limits half is test/fuzz.test.ts (split so each file
 * stays well within the per-file timeout, with the same properties and runs).
 *
 * Seeds are fixed so CI is deterministic and printed with a failure; FC_SEED=<n> (or FUZZ_SEED, its older name)
 * explores others, FUZZ_RUNS=<n> scales every property.
 *
 * On every store engine (LMDB, and PostgreSQL when the test cluster is there): what a hostile chat saves to a session
 * must be storable on both.
 */
import t from 'tap'
import fc from 'fast-check'
import { startHarness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'
import { CHAT_BASE, chatCorruption, chatHostile, clean, holds, json, expecting } from './helpers/fuzz-cases.js'

for (const engine of testableEngines(t, 'chat properties')) {
  t.test(`${engine.name}: chat properties over one gateway`, async (t) => {
    const h = await startHarness(t, { engine })
    const chat = '/api/v1/chat/completions'
    // Something to retrieve, so RAG runs on the hostile queries.
    t.equal((await json(h, '/api/v1/files', { filename: 'seed.md', content: '# Seed\n\nThe otter <|endoftext|> swims.' })).status, 201)

    t.test('chat: one corrupted or missing field → 400 naming it', async (t) => {
      await holds(t, fc.asyncProperty(chatCorruption, async (c) => void (await clean(await json(h, chat, c.body), expecting(c.body, { param: c.param ?? null, statuses: [400] })))), 600)
      t.equal(h.mock.requests.filter((r) => r.path.endsWith('/chat/completions')).length, 0, 'nothing invalid reached the upstream')
    })

    t.test('chat: hostile text in valid bodies (special tokens, lone surrogates, huge) → 200, or 400 for the session id', async (t) => {
      await holds(t,
        fc.asyncProperty(chatHostile, async ({ extra, ...b }) => {
          const body = { ...extra, ...b }
          const proto = expecting(body).param
          const r = await clean(await json(h, chat, body), proto === undefined ? {} : expecting(body))
          const e = (r.body as { error?: { param: string; code: string } }).error
          if (r.status === 400 && e?.param !== proto && e?.param !== 'sessionId' && e?.code !== 'context_length_exceeded') throw new Error(`unexpected 400: ${r.text.slice(0, 300)}`)
          if (r.status === 200 && b.sessionId !== undefined && b.saveToMemory) {
            await clean(await h.fetch(`/api/v1/sessions/${encodeURIComponent(b.sessionId)}`), { statuses: [200] })
          }
        }),
        300,
      )
    })

    t.test('chat: truncated JSON, invalid UTF-8, random bytes, deep nesting, wrong content types', async (t) => {
      const valid = JSON.stringify({ ...CHAT_BASE, messages: [{ role: 'user', content: 'héllo <|endoftext|> wörld' }] })
      await holds(t,
        fc.asyncProperty(fc.integer({ min: 0, max: valid.length - 1 }), async (cut) => void (await clean(await json(h, chat, valid.slice(0, cut)), { param: null, statuses: [400] }))),
        150,
      )
      const bytes = Buffer.from(valid)
      const badUtf8 = fc.constantFrom([0xff], [0xfe, 0xff], [0xc3], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82], [0xc0, 0xaf])
      await holds(t,
        fc.asyncProperty(fc.integer({ min: 0, max: bytes.length }), badUtf8, async (at, junk) => {
          const body = Buffer.concat([bytes.subarray(0, at), Buffer.from(junk), bytes.subarray(at)])
          await clean(await json(h, chat, body))
        }),
        150,
      )
      await holds(t, fc.asyncProperty(fc.uint8Array({ maxLength: 256 }), async (b) => void (await clean(await json(h, chat, b), { ok: false }))), 100)
      await holds(t,
        fc.asyncProperty(fc.integer({ min: 1, max: 4000 }), fc.constantFrom('[', '{"a":'), async (depth, open) => {
          const close = open === '[' ? ']' : '}'
          const body = `{"model":"openai/gpt-4o","messages":[{"role":"user","content":"x"}],"useRAG":false,"x":${open.repeat(depth)}${open === '[' ? '' : '1'}${close.repeat(depth)}}`
          // The body object is level 1, so `x` may nest 127 more.
          await clean(await json(h, chat, body), depth <= 127 ? { statuses: [200] } : { statuses: [400], param: null })
        }),
        60,
      )
      const types = fc.oneof(
        fc.constantFrom('text/plain', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded', 'application/jsonx', 'json', ';;;', 'application/', '*/*'),
        fc.constantFrom('application/json; charset=utf-8', 'APPLICATION/JSON', 'application/vnd.api+json', ' application/json ;x=1'),
        fc.stringMatching(/^[\x21-\x7e]{0,30}$/),
      )
      await holds(t,
        fc.asyncProperty(types, async (type) => {
          const m = type.split(';', 1)[0]?.trim().toLowerCase() ?? ''
          const isJson = m === 'application/json' || (m.startsWith('application/') && m.endsWith('+json'))
          await clean(await json(h, chat, valid, { type }), isJson ? { statuses: [200] } : { statuses: [415] })
        }),
        100,
      )
    })


    t.test('afterwards: still serving, and nothing was an internal error', async (t) => {
      t.equal((await h.fetch('/healthz')).status, 200)
      const errors = h.logs().split('\n').filter((l) => l.includes('"level":"error"'))
      t.same(errors.slice(0, 3), [], 'no error-level log line (every 5xx logs one)')
    })
  })
}
