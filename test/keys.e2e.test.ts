/**
 * Keys belong to tenants (issue 27, item 7), end to end on a real gateway: a key from before tenants had their own id
 * keeps its data; `keys rotate` and `keys set-plan` keep the tenant's sessions; a revoked key is told so (these on LMDB:
 * see the comments over them); the admin API does the same for operators who automate, behind ADMIN_KEY, on
 * every store engine. The PostgreSQL engine also runs the store cases in test/store-conformance.test.ts and across two
 * replicas in test/replicas-postgres.e2e.test.ts.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import t from 'tap'
import { hashKey, keyIdFor, tenantIdFor } from '../src/auth/service-keys.js'
import { main } from '../src/cli/main.js'
import { openStore } from '../src/storage/store.js'
import { capturedIo } from './helpers/captured-io.js'
import { KEY_A, KEY_FREE, PROVIDER_KEY, startHarness, type Harness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'

const ADMIN_KEY = 'admin-key-for-the-tests-0123456789'

function client(h: Harness, key: string): OpenAI {
  return new OpenAI({ baseURL: `${h.gw.url}/api/v1`, apiKey: PROVIDER_KEY, defaultHeaders: { serviceKey: key }, maxRetries: 0 })
}

async function cli(args: string[], dataDir: string): Promise<{ code: number; out: string; err: string }> {
  const io = capturedIo({ DATA_DIR: dataDir })
  const code = await main(args, io)
  return { code, out: io.out(), err: io.err() }
}

// LMDB only: the legacy record is written into DATA_DIR's LMDB as earlier versions wrote it, and the CLI's changes are
// asserted to reach the running gateway at once, which is LMDB's (one environment). On PostgreSQL another process's
// change reaches a gateway within its key cache's 5 s (storage/postgres/key-store.ts): test/replicas-postgres.e2e.test.ts
// runs rotate and set-plan through the CLI that way.
t.test('a key stored before tenants had their own id keeps its sessions through rotate and set-plan', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'recallgate-keys-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  // The record exactly as every earlier version wrote it: no tenant; its data lives under the hash-derived tenant.
  const oldKey = 'rg_a-key-created-by-an-older-version'
  const hash = hashKey(oldKey)
  const store = openStore({ dir: dataDir })
  await store.durable(() => store.keys.put(hash, { id: keyIdFor(hash), hash, plan: 'pro', createdAt: 1_700_000_000_000, label: 'legacy' }))
  await store.close()

  const h = await startHarness(t, { dataDir })
  await client(h, oldKey).chat.completions.create({
    model: 'openai/gpt-4o-mini',
    messages: [{ role: 'user', content: 'My name is Ada.' }],
    // @ts-expect-error recallgate's extension
    sessionId: 'ada',
  })
  const before = await h.fetch('/api/v1/sessions/ada', { key: oldKey })
  t.equal(before.status, 200)

  const listed = await cli(['keys', 'list', '--json'], dataDir)
  t.equal(listed.code, 0, listed.err)
  const rows = JSON.parse(listed.out) as Array<{ id: string; tenant: string; created_at: number; revoked_at: number | null }>
  t.match(rows, [{ id: keyIdFor(hash), object: 'service_key', tenant: tenantIdFor(hash), plan: 'pro', label: 'legacy', created_at: 1_700_000_000, revoked_at: null }], 'the old key reads back with its derived tenant, created_at in seconds')

  const rotated = await cli(['keys', 'rotate', keyIdFor(hash)], dataDir)
  t.equal(rotated.code, 0, rotated.err)
  const newKey = rotated.out.trim()
  t.match(newKey, /^rg_/)
  t.match(rotated.err, new RegExp(`rotated ${keyIdFor(hash)} → key_[0-9a-f]{12} \\(plan pro, tenant ${tenantIdFor(hash)}\\)`))

  const after = await h.fetch('/api/v1/sessions/ada', { key: newKey })
  t.equal(after.status, 200, 'the new key opens the same session')
  t.same(((await after.json()) as { messages: unknown[] }).messages.length, 2)
  const refused = await client(h, oldKey).models.list().then(
    () => undefined,
    (err: unknown) => err,
  )
  t.type(refused, OpenAI.AuthenticationError, 'the old key is refused at once')
  t.match((refused as InstanceType<typeof OpenAI.AuthenticationError>).error, { code: 'key_revoked', type: 'authentication_error' }, 'and told it was revoked')

  const newId = /→ (key_[0-9a-f]{12})/.exec(rotated.err)?.[1] ?? ''
  const moved = await cli(['keys', 'set-plan', newId, 'free'], dataDir)
  t.equal(moved.code, 0, moved.err)
  t.match(moved.out, `${newId} is now on plan free (tenant ${tenantIdFor(hash)})`)
  const res = await h.fetch('/api/v1/sessions/ada', { key: newKey })
  t.equal(res.status, 200, 'the session is still there on the new plan')
  t.equal(res.headers.get('x-ratelimit-limit-requests'), '10', 'and the free plan limits it at once')

  t.equal((await cli(['keys', 'set-plan', keyIdFor(hash), 'pro'], dataDir)).code, 1, 'a revoked key cannot be re-planned')
  t.equal((await cli(['keys', 'set-plan', newId, 'gold'], dataDir)).code, 2, 'an unknown plan is a usage error')
})

// LMDB only: about DATA_DIR itself (its creation and the line saying which one is used).
t.test('keys commands say which DATA_DIR they use, and warn when they had to create it', async (t) => {
  const parent = mkdtempSync(join(tmpdir(), 'recallgate-keys-'))
  t.teardown(() => rmSync(parent, { recursive: true, force: true }))
  const dataDir = join(parent, 'not-there-yet')
  const first = await cli(['keys', 'list'], dataDir)
  t.equal(first.code, 0)
  t.match(first.err, `recallgate: using DATA_DIR ${dataDir}`)
  t.match(first.err, `warning: DATA_DIR ${dataDir} did not exist and was created empty`)
  t.ok(existsSync(dataDir))
  const second = await cli(['keys', 'list'], dataDir)
  t.match(second.err, `using DATA_DIR ${dataDir}`)
  t.notMatch(second.err, /warning/, 'not the second time')
  const served = await startHarness(t, { dataDir: join(parent, 'served') })
  t.match(served.logs(), /"level":"warn".*"dataDir":"[^"]*served".*"msg":"DATA_DIR did not exist: created it empty"/, 'serve warns too')
  t.match(served.logs(), /"dataDir":"[^"]*served".*"msg":"recallgate listening"/, 'and says which DATA_DIR it serves')
  const wrong = await cli(['keys', 'rotate'], join(parent, 'also-not-there'))
  t.equal(wrong.code, 2, 'a wrong call is refused before any store is opened')
  t.notOk(existsSync(join(parent, 'also-not-there')), 'and creates nothing')
})

for (const engine of testableEngines(t, 'the admin keys API')) {
  t.test(`${engine.name}: the admin API: 404 without ADMIN_KEY; with it, keys are listed, created, re-planned, rotated and revoked`, async (t) => {
    const h = await startHarness(t, { engine })
    const admin = (path: string, init: RequestInit & { bearer?: string | null } = {}): Promise<Response> => {
      const { bearer = ADMIN_KEY, ...rest } = init
      const headers = new Headers(rest.headers)
      if (bearer !== null) headers.set('authorization', `Bearer ${bearer}`)
      if (rest.body !== undefined) headers.set('content-type', 'application/json')
      return fetch(`${h.gw.url}/api/v1/admin/keys${path}`, { ...rest, headers })
    }
    const off = await admin('')
    t.equal(off.status, 404, 'no ADMIN_KEY: the routes do not exist')
    t.match(await off.json(), { error: { code: 'not_found', type: 'not_found_error' } })

    await h.restart({ ADMIN_KEY })
    const none = await admin('', { bearer: null })
    t.equal(none.status, 401)
    t.match(await none.json(), { error: { code: 'invalid_admin_key', type: 'authentication_error', param: null } })
    t.equal((await admin('', { bearer: KEY_A })).status, 401, 'a service key is not an admin key')
    t.equal((await admin('', { bearer: null, headers: { serviceKey: KEY_A } })).status, 401)

    const bad = await admin('', { method: 'POST', body: JSON.stringify({ plan: 'gold' }) })
    t.equal(bad.status, 400)
    t.match(await bad.json(), { error: { code: 'invalid_parameter', param: 'plan' } })

    const created = await admin('', { method: 'POST', body: JSON.stringify({ plan: 'premium', label: 'ci' }) })
    t.equal(created.status, 201)
    const made = (await created.json()) as { id: string; key: string; tenant: string; plan: string; created_at: number }
    t.match(made, { object: 'service_key', plan: 'premium', label: 'ci', revoked_at: null, key: /^rg_/, tenant: /^t_[0-9a-f]{24}$/ })
    t.ok(made.created_at < 10_000_000_000, 'created_at in seconds')
    await client(h, made.key).chat.completions.create({
      model: 'openai/gpt-4o-mini',
      messages: [{ role: 'user', content: 'Remember: blue.' }],
      // @ts-expect-error recallgate's extension
      sessionId: 's1',
    })

    const listed = (await (await admin('')).json()) as { object: string; data: Array<{ id: string; key?: string; hash?: string }> }
    t.equal(listed.object, 'list')
    t.ok(listed.data.some((k) => k.id === made.id), 'listed')
    t.ok(listed.data.every((k) => k.key === undefined && k.hash === undefined), 'never a key or a hash in a listing')

    const planned = await admin(`/${made.id}`, { method: 'POST', body: JSON.stringify({ plan: 'free' }) })
    t.match(await planned.json(), { id: made.id, tenant: made.tenant, plan: 'free' })
    t.equal((await h.fetch('/api/v1/sessions/s1', { key: made.key })).headers.get('x-ratelimit-limit-requests'), '10', 'the new plan applies at once')

    const rotated = await admin(`/${made.id}/rotate`, { method: 'POST' })
    t.equal(rotated.status, 201)
    const next = (await rotated.json()) as { id: string; key: string; tenant: string; plan: string }
    t.match(next, { tenant: made.tenant, plan: 'free', label: 'ci' })
    t.not(next.id, made.id)
    t.equal((await h.fetch('/api/v1/sessions/s1', { key: next.key })).status, 200, "the rotated key opens the tenant's session")
    const old = await h.fetch('/api/v1/sessions/s1', { key: made.key })
    t.equal(old.status, 401)
    t.match(await old.json(), { error: { code: 'key_revoked' } })
    t.match(await (await admin(`/${made.id}`)).json(), { id: made.id, revoked_at: Number }, 'the old record stays, revoked')

    const revoked = await admin(`/${next.id}`, { method: 'DELETE' })
    t.equal(revoked.status, 200)
    t.match(await revoked.json(), { id: next.id, revoked_at: Number })
    t.match(await (await h.fetch('/api/v1/sessions', { key: next.key })).json(), { error: { code: 'key_revoked' } })
    const again = await admin(`/${next.id}`, { method: 'DELETE' })
    t.equal(again.status, 404)
    t.match(await again.json(), { error: { code: 'not_found', param: 'id' } })
    t.equal((await admin('/key_nope/rotate', { method: 'POST' })).status, 404)
  })
}

// One keep-alive connection carrying several keys in turn (what a shared proxy's pooled connection does): the
// gateway remembers the key a connection presented last (auth/authenticator.ts), and must never let that memory answer
// for another key, nor outlive a revocation. (A 401 closes its connection: each refusal is the last request on one.)
t.test('keys changing on one keep-alive connection: each request answered for its own key, a revocation at once', async (t) => {
  const { Agent, request } = await import('node:http')
  const h = await startHarness(t)
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const get = (key: string): Promise<{ status: number; plan: string | undefined; socket: unknown }> =>
    new Promise((resolve, reject) => {
      let socket: unknown
      const req = request(`${h.gw.url}/api/v1/models`, { agent, headers: { serviceKey: key, authorization: `Bearer ${PROVIDER_KEY}` } }, (res) => {
        res.resume()
        res.on('end', () => resolve({ status: res.statusCode ?? 0, plan: res.headers['x-ratelimit-limit-requests'] as string | undefined, socket }))
      })
      req.on('socket', (s) => (socket = s))
      req.on('error', reject)
      req.end()
    })
  const io = capturedIo({ DATA_DIR: h.dataDir })
  t.equal(await main(['keys', 'create', '--plan', 'free'], io), 0)
  const stored = io.out().trim()

  const answers = []
  for (const key of [KEY_A, KEY_FREE, KEY_A, stored, stored, `${stored.slice(0, -1)}${stored.endsWith('x') ? 'y' : 'x'}`]) answers.push(await get(key))
  t.same(
    answers.map((a) => [a.status, a.plan]),
    [[200, 'unlimited'], [200, '10'], [200, 'unlimited'], [200, '10'], [200, '10'], [401, undefined]],
    'inline keys of two plans in turn, a stored key, then a key one character off it: each answered for itself',
  )
  t.equal(new Set(answers.map((a) => a.socket)).size, 1, 'all on one connection')

  const before = await get(stored)
  t.equal(before.status, 200)
  t.equal(await main(['keys', 'revoke', keyIdFor(hashKey(stored))], capturedIo({ DATA_DIR: h.dataDir })), 0)
  const after = await get(stored)
  t.equal(after.status, 401, 'revoked: refused at once')
  t.equal(after.socket, before.socket, 'on the connection that presented it before')
})
