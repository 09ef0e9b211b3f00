/**
 * What the README and docs/operations.md tell a new user (issue 27, item 12), checked against the running thing: the
 * offline quick start's port and `/api/v1` suffix, the upload response's fields, where retrieved excerpts go, how model
 * ids reach the upstream, and the Kubernetes readiness probe's path. On every store engine (LMDB, and PostgreSQL when
 * the test cluster is there).
 */
import { readFileSync } from 'node:fs'
import t from 'tap'
import { help as mockHelp } from '../src/cli/mock-upstream.js'
import { BLOCK_ROLE } from '../src/context/block-role.js'
import { startHarness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'
import { uploadJson } from './helpers/uploads.js'

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
const operations = readFileSync(new URL('../docs/operations.md', import.meta.url), 'utf8')

for (const engine of testableEngines(t, 'the documentation promises')) {
  t.test(`${engine.name}: the offline quick start: the mock on the port its help names, the gateway at its /api/v1, npx for the bin`, async (t) => {
    const port = /--port N\s+listen port \(default (\d+)/.exec(mockHelp)?.[1]
    t.ok(port, 'mock-upstream --help names its default port')
    t.match(readme, 'npx recallgate mock-upstream', 'the README runs the bin through npx')
    t.match(readme, `UPSTREAM_BASE_URL=http://127.0.0.1:${port}/api/v1 npx recallgate serve`, 'and points the gateway at that port, with the /api/v1 suffix')
    // The suffix is where the mock serves: a gateway pointed there answers a chat.
    const h = await startHarness(t, { engine })
    t.match(h.mock.url, /\/api\/v1$/)
    const reply = await h.client().chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hello offline' }] })
    t.match(reply.choices[0]?.message.content, /hello offline/, 'the mock echoes the last user message, as the README says')
  })

  t.test(`${engine.name}: the upload response has exactly the fields the README lists, content_type among them`, async (t) => {
    const row = readme.split('\n').find((l) => l.startsWith('| `POST /api/v1/files` |')) ?? ''
    const listed = /201 \{([^}]*)\}/.exec(row)?.[1]?.split(',').map((f) => f.trim().split(':')[0]?.trim()) ?? []
    t.ok(listed.includes('content_type'), 'content_type is documented')
    const h = await startHarness(t, { engine })
    const res = await uploadJson(h, { filename: 'notes.md', content: '# Notes\n\nThe zorblat runs on Tuesdays.', metadata: { team: 'ops' } }, { provider: null })
    t.equal(res.status, 201)
    const body = (await res.json()) as Record<string, unknown>
    t.same(Object.keys(body).sort(), [...listed].sort(), 'documented fields = answered fields')
    t.equal(body.content_type, 'text/markdown')
  })

  t.test(`${engine.name}: retrieved excerpts ride as a user message after the history, as the knowledge-base section says`, async (t) => {
    t.match(readme, /go into one \*\*`user` message\*\* placed after the history/)
    t.equal(BLOCK_ROLE, 'user')
    const h = await startHarness(t, { engine })
    await uploadJson(h, { filename: 'zorblat.md', content: 'The zorblat engine runs on Tuesdays and Fridays.' }, { provider: null })
    await h.client().chat.completions.create({
      model: 'openai/gpt-4o-mini',
      messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'When does the zorblat engine run?' }],
    })
    const sent = h.mock.lastChatBody()?.messages as Array<{ role: string; content: string }>
    t.same(sent.map((m) => m.role), ['system', 'user', 'user'], 'system, the excerpts, the question')
    t.match(sent[1]?.content, /zorblat\.md/, 'the excerpts name their file')
  })

  t.test(`${engine.name}: model ids reach the upstream unchanged, as the OpenAI-as-upstream note says`, async (t) => {
    t.match(readme, /\*\*Model ids pass through unchanged\*\*/)
    const h = await startHarness(t, { engine })
    for (const model of ['openai/gpt-4o', 'meta-llama/llama-3.1-8b-instruct:free']) {
      await h.client().chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] })
      t.equal(h.mock.lastChatBody()?.model, model)
    }
  })

  t.test(`${engine.name}: operations.md's Kubernetes readiness probe is /readyz, which answers ready`, async (t) => {
    const path = /readinessProbe: \{ httpGet: \{ path: (\S+), port/.exec(operations)?.[1]
    t.equal(path, '/readyz')
    const h = await startHarness(t, { engine })
    const res = await h.fetch(path ?? '', { key: null, provider: null })
    t.equal(res.status, 200)
    t.match(await res.json(), { status: 'ready' })
  })
}
