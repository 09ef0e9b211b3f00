/**
 * The store contract (src/storage/interface.ts), one test file run against every engine (test/helpers/store-engines.ts:
 * LMDB, and PostgreSQL when the test cluster is there). Each case asserts what a caller of the interface relies on, nothing engine-specific.
 */
import t from 'tap'
import { hashKey, tenantIdFor } from '../src/auth/service-keys.js'
import { InvalidSessionIdError, SessionLimitError, type KeyLookupResult, type RequestTrace, type StoredItem, type StoredResponse } from '../src/storage/interface.js'
import type { Stores } from '../src/storage/open-stores.js'
import { testableEngines } from './helpers/store-engines.js'
import { wholeTrace } from './helpers/traces.js'

/** What an instance answers for a presented key: from its cache, or from its engine on a miss (as the authenticator asks). */
async function lookup(s: Stores, hash: string): Promise<KeyLookupResult> {
  return s.keys.lookup(hash) ?? (await s.keys.lookupMiss?.(hash))
}

/**
 * An engine whose key lookups answer from a per-process cache refreshes it on a timer (PostgreSQL: every 5 s); here
 * that tick is run at once instead of waited for. LMDB reads the store on every lookup and has nothing to refresh.
 */
async function refreshed(s: Stores): Promise<void> {
  const keys = s.keys as Partial<{ reload(): Promise<void> }>
  await keys.reload?.()
}

const item = (id: string, text: string): StoredItem => ({
  type: 'message',
  id,
  role: 'user',
  content: [{ type: 'input_text', text }],
})

function response(id: string, previous: string | null, n: number): StoredResponse {
  return {
    id,
    createdAt: 1_700_000_000_000 + n,
    completedAt: 1_700_000_000_000 + n,
    model: 'openai/gpt-4o-mini',
    status: 'completed',
    previousResponseId: previous,
    conversationId: null,
    input: [item(`msg_in_${id}`, `question ${n}`)],
    output: [{ type: 'message', id: `msg_out_${id}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: `answer ${n}`, annotations: [] }] }],
    messages: [
      { message: { role: 'user', content: `question ${n}` }, tokens: 2 },
      { message: { role: 'assistant', content: `answer ${n}` }, tokens: 2 },
    ],
    usage: { input_tokens: 10, output_tokens: 2, total_tokens: 12 },
    error: null,
    incompleteDetails: null,
    echo: { instructions: null, metadata: { k: 'v' } },
  }
}

for (const engine of testableEngines(t, 'the store contract')) {
  t.test(`${engine.name}: a saved response reads back whole, survives a reopen, and its items resolve by id`, async (t) => {
    const s = await engine.open(t)
    await s.responses.save('tenant-a', response('resp_1', null, 1))
    await s.responses.save('tenant-a', response('resp_2', 'resp_1', 2))
    const again = await s.reopen()
    const got = await again.responses.get('tenant-a', 'resp_2')
    t.equal(got?.previousResponseId, 'resp_1')
    t.same(got?.messages.map((m) => m.message.content), ['question 2', 'answer 2'])
    t.same(got?.echo, { instructions: null, metadata: { k: 'v' } })
    t.equal((await again.responses.findItem('tenant-a', 'msg_out_resp_1'))?.role, 'assistant', 'an output item resolves')
    t.equal((await again.responses.findItem('tenant-a', 'msg_in_resp_2'))?.type, 'message', 'an input item resolves')
    t.equal(await again.responses.findItem('tenant-a', 'msg_nope'), undefined)
  })

  t.test(`${engine.name}: responses are tenant-scoped, deletes are final, odd ids are simply not found`, async (t) => {
    const s = await engine.open(t)
    await s.responses.save('tenant-a', response('resp_1', null, 1))
    t.equal(await s.responses.get('tenant-b', 'resp_1'), undefined, "another tenant's id is not found")
    t.equal(await s.responses.findItem('tenant-b', 'msg_out_resp_1'), undefined, "another tenant's item is not found")
    t.equal(await s.responses.delete('tenant-b', 'resp_1'), false)
    t.equal(await s.responses.delete('tenant-a', 'resp_1'), true)
    t.equal(await s.responses.get('tenant-a', 'resp_1'), undefined)
    t.equal(await s.responses.findItem('tenant-a', 'msg_out_resp_1'), undefined, 'its items go with it')
    t.equal(await s.responses.delete('tenant-a', 'resp_1'), false, 'a second delete finds nothing')
    await s.responses.save('tenant-a', response('resp_2', null, 2))
    await s.responses.save('tenant-a', response('resp_3', 'resp_2', 3))
    t.equal(await s.responses.countExisting('tenant-a', ['resp_1', 'resp_2', 'resp_3', 'a\u0000b']), 2, 'existence counts only what is stored')
    t.equal(await s.responses.countExisting('tenant-b', ['resp_2', 'resp_3']), 0, "another tenant's ids do not exist")
    t.equal(await s.responses.countExisting('tenant-a', []), 0)
    for (const odd of ['', 'x'.repeat(5000), 'a\u0000b'])
      t.equal(await s.responses.get('tenant-a', odd), undefined, `id of length ${odd.length}`)
  })

  t.test(`${engine.name}: deletions counts every deleted response of a tenant, through any instance, and nothing else`, async (t) => {
    const s = await engine.open(t)
    const other = await s.another()
    t.equal(await s.responses.deletions('tenant-a'), 0, 'nothing deleted yet')
    await s.responses.save('tenant-a', response('resp_1', null, 1))
    await s.responses.save('tenant-a', response('resp_2', 'resp_1', 2))
    await s.responses.save('tenant-a', response('resp_2', 'resp_1', 2))
    t.equal(await s.responses.deletions('tenant-a'), 0, 'saves, a repeated one included, do not count')
    t.equal(await other.responses.delete('tenant-a', 'resp_1'), true)
    t.equal(await s.responses.deletions('tenant-a'), 1, "another instance's delete counts here at once")
    t.equal(await s.responses.delete('tenant-a', 'resp_1'), false)
    t.equal(await s.responses.delete('tenant-b', 'resp_2'), false)
    t.equal(await s.responses.deletions('tenant-a'), 1, 'deletes that find nothing do not count')
    t.equal(await s.responses.deletions('tenant-b'), 0, "another tenant's count is its own")
    await s.responses.delete('tenant-a', 'resp_2')
    t.equal(await (await s.reopen()).responses.deletions('tenant-a'), 2, 'the count survives a restart')
  })

  t.test(`${engine.name}: conversations: ensure is idempotent, metadata updates, delete is final`, async (t) => {
    const s = await engine.open(t)
    const first = await s.conversations.ensure('tenant-a', { id: 'conv_1', createdAt: 1000, metadata: { topic: 'a' } })
    const second = await s.conversations.ensure('tenant-a', { id: 'conv_1', createdAt: 2000, metadata: {} })
    t.same(second, first, 'an existing record is kept')
    t.equal(await s.conversations.get('tenant-b', 'conv_1'), undefined)
    t.same((await s.conversations.update('tenant-a', 'conv_1', { topic: 'b' }))?.metadata, { topic: 'b' })
    t.equal(await s.conversations.update('tenant-a', 'conv_2', {}), undefined)
    const again = await s.reopen()
    t.same((await again.conversations.get('tenant-a', 'conv_1'))?.metadata, { topic: 'b' })
    t.equal(await again.conversations.delete('tenant-a', 'conv_1'), true)
    t.equal(await again.conversations.get('tenant-a', 'conv_1'), undefined)
  })

  t.test(`${engine.name}: sessions through the interface: append, read newest first limits, list, delete`, async (t) => {
    const s = await engine.open(t)
    await s.sessions.appendExchange('tenant-a', 's1', [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello' }])
    await s.sessions.appendExchange('tenant-a', 's1', [{ role: 'user', content: 'again' }, { role: 'assistant', content: 'yes' }])
    t.same((await s.sessions.history('tenant-a', 's1', 2)).map((m) => m.text), ['again', 'yes'])
    t.equal((await s.sessions.get('tenant-a', 's1'))?.messageCount, 4)
    t.same((await s.sessions.history('tenant-b', 's1')).length, 0)
    t.same((await s.sessions.list('tenant-a', { limit: 10 })).data.map((i) => i.id), ['s1'])
    t.equal(await s.sessions.delete('tenant-a', 's1'), true)
    t.equal(await s.sessions.get('tenant-a', 's1'), undefined)
  })

  t.test(`${engine.name}: replaceFrom rewinds the tail in the same save, and seqs stay contiguous`, async (t) => {
    const s = await engine.open(t)
    await s.sessions.appendExchange('tenant-a', 's', [{ role: 'user', content: 'one' }, { role: 'assistant', content: 'uno' }])
    await s.sessions.appendExchange('tenant-a', 's', [{ role: 'user', content: 'two' }, { role: 'assistant', content: 'dos' }])
    const saved = await s.sessions.appendExchange(
      'tenant-a',
      's',
      [{ role: 'user', content: 'two, edited' }, { role: 'assistant', content: 'deux' }],
      { replaceFrom: 2 },
    )
    t.same(saved.map((m) => m.seq), [2, 3], 'the new messages take the replaced seqs')
    const h = await s.sessions.history('tenant-a', 's')
    t.same(h.map((m) => m.text), ['one', 'uno', 'two, edited', 'deux'])
    t.same(h.map((m) => m.seq), [0, 1, 2, 3])
    await s.sessions.appendExchange('tenant-a', 's', [], { replaceFrom: 3 })
    t.same((await s.sessions.history('tenant-a', 's')).map((m) => m.text), ['one', 'uno', 'two, edited'], 'replacing with nothing removes the tail')
    t.equal((await s.sessions.get('tenant-a', 's'))?.messageCount, 3)
    const next = await s.sessions.appendExchange('tenant-a', 's', [{ role: 'assistant', content: 'trois' }])
    t.same(next.map((m) => m.seq), [3], 'the next save continues where the rewind left off')
    const again = await s.reopen()
    t.same((await again.sessions.history('tenant-a', 's')).map((m) => `${m.seq}:${m.text}`), ['0:one', '1:uno', '2:two, edited', '3:trois'])
  })

  t.test(`${engine.name}: messages beyond the per-session bound are pruned oldest first, in the save`, async (t) => {
    const s = await engine.open(t, { maxMessagesPerSession: 3 })
    await s.sessions.appendExchange('tenant-a', 's', [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }])
    await s.sessions.appendExchange('tenant-a', 's', [{ role: 'user', content: 'c' }, { role: 'assistant', content: 'd' }])
    t.same((await s.sessions.history('tenant-a', 's')).map((m) => `${m.seq}:${m.text}`), ['1:b', '2:c', '3:d'])
    t.equal((await s.sessions.get('tenant-a', 's'))?.messageCount, 3)
    await s.sessions.appendExchange('tenant-a', 's', [{ role: 'user', content: 'e' }, { role: 'assistant', content: 'f' }, { role: 'user', content: 'g' }, { role: 'assistant', content: 'h' }])
    const again = await s.reopen()
    t.same((await again.sessions.history('tenant-a', 's')).map((m) => `${m.seq}:${m.text}`), ['5:f', '6:g', '7:h'], 'an exchange longer than the bound keeps its newest')
  })

  t.test(`${engine.name}: a plan's session bound refuses a new session whole, never a save to one that exists`, async (t) => {
    const s = await engine.open(t)
    const bounds = { maxSessions: 2 }
    const say = (text: string) => [{ role: 'user' as const, content: text }]
    await s.sessions.appendExchange('tenant-a', 's1', say('one'), { bounds })
    await s.sessions.appendExchange('tenant-a', 's2', say('two'), { bounds })
    await s.sessions.appendExchange('tenant-b', 's3', say('another tenant has its own count'), { bounds })
    const refused = await s.sessions.appendExchange('tenant-a', 's3', say('three'), { bounds }).catch((err: unknown) => err)
    t.type(refused, SessionLimitError)
    t.match(refused, { limit: 2, used: 2 })
    t.equal(await s.sessions.get('tenant-a', 's3'), undefined, 'nothing of the refused save is left')
    t.equal((await s.sessions.appendExchange('tenant-a', 's1', say('more'), { bounds })).length, 1, 'an existing session still saves')
    t.same(await s.sessions.usage('tenant-a'), { sessions: 2, largestSession: 2 })
    t.same(await s.sessions.usage('tenant-c'), { sessions: 0, largestSession: 0 })
    await s.sessions.delete('tenant-a', 's2')
    await s.sessions.appendExchange('tenant-a', 's3', say('three'), { bounds })
    t.equal((await s.sessions.get('tenant-a', 's3'))?.messageCount, 1, 'a deleted session frees its place')
  })

  t.test(`${engine.name}: saves racing for the last free session (two instances): exactly one wins`, async (t) => {
    const s = await engine.open(t)
    const other = await s.another()
    const bounds = { maxSessions: 3 }
    await s.sessions.appendExchange('tenant-a', 'first', [{ role: 'user', content: 'x' }], { bounds })
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) =>
        (i % 2 === 0 ? s : other).sessions.appendExchange('tenant-a', `racer-${i}`, [{ role: 'user', content: `r${i}` }], { bounds }),
      ),
    )
    t.equal(results.filter((r) => r.status === 'fulfilled').length, 2, 'the two free places are taken, no more')
    t.ok(results.every((r) => r.status === 'fulfilled' || r.reason instanceof SessionLimitError), 'the others are refused as over the bound')
    t.equal((await s.sessions.usage('tenant-a')).sessions, 3)
  })

  t.test(`${engine.name}: a plan's message bound prunes oldest first, never past the store's own bound`, async (t) => {
    const s = await engine.open(t, { maxMessagesPerSession: 5 })
    const turn = (i: number) => [{ role: 'user' as const, content: `q${i}` }, { role: 'assistant' as const, content: `a${i}` }]
    for (let i = 0; i < 3; i++) await s.sessions.appendExchange('tenant-a', 's', turn(i), { bounds: { maxMessages: 3 } })
    t.same((await s.sessions.history('tenant-a', 's')).map((m) => m.text), ['a1', 'q2', 'a2'])
    for (let i = 3; i < 6; i++) await s.sessions.appendExchange('tenant-a', 's', turn(i), { bounds: { maxMessages: 100 } })
    t.equal((await s.sessions.get('tenant-a', 's'))?.messageCount, 5, "a plan's larger figure stops at the store's bound")
    t.same(await s.sessions.usage('tenant-a'), { sessions: 1, largestSession: 5 })
  })

  t.test(`${engine.name}: sessions list newest first, page by page with after, per tenant`, async (t) => {
    let clock = 1_700_000_000_000
    const s = await engine.open(t, { now: () => clock })
    // Created in this order, one a millisecond; 'é' and 'B' in the same millisecond (ties: id descending).
    for (const id of ['b', 'a', 'é', 'B', 'c']) {
      await s.sessions.appendExchange('tenant-a', id, [{ role: 'user', content: id }])
      if (id !== 'é') clock++
    }
    await s.sessions.appendExchange('tenant-a', 'b', [{ role: 'user', content: 'b again' }])
    await s.sessions.appendExchange('tenant-b', 'a0', [{ role: 'user', content: 'other tenant' }])
    const p1 = await s.sessions.list('tenant-a', { limit: 2 })
    t.same(p1.data.map((i) => i.id), ['c', 'é'], 'newest created first, ties by id descending; an update does not move one')
    t.equal(p1.hasMore, true)
    const p2 = await s.sessions.list('tenant-a', { limit: 2, after: 'é' })
    t.same(p2.data.map((i) => i.id), ['B', 'a'])
    t.equal(p2.hasMore, true)
    const p3 = await s.sessions.list('tenant-a', { limit: 2, after: 'a' })
    t.same(p3.data.map((i) => i.id), ['b'])
    t.equal(p3.hasMore, false)
    t.same((await s.sessions.list('tenant-a', { limit: 2, after: 'gone' })).data, [], 'an after that names no session ends the list')
    // A client's cursor no stored id can hold (PostgreSQL text cannot even hold the NUL) names no session either.
    for (const after of ['a\u0000', 'a\u001f'])
      t.same(await s.sessions.list('tenant-a', { limit: 2, after }), { data: [], hasMore: false }, `after ${JSON.stringify(after)} names no session`)
    t.equal(await s.sessions.delete('tenant-a', 'é'), true)
    t.same((await s.sessions.list('tenant-a', { limit: 10 })).data.map((i) => i.id), ['c', 'B', 'a', 'b'], 'a deleted session leaves the list')
    t.same((await s.sessions.list('tenant-b', { limit: 10 })).data.map((i) => i.id), ['a0'])
    t.same((await s.sessions.list('tenant-c', { limit: 10 })).data, [])
  })

  t.test(`${engine.name}: concurrent saves to one session never collide and none is lost`, async (t) => {
    const s = await engine.open(t)
    const other = await s.another()
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        (i % 2 === 0 ? s : other).sessions.appendExchange('tenant-a', 's', [{ role: 'user', content: `q${i}` }, { role: 'assistant', content: `a${i}` }]),
      ),
    )
    const h = await s.sessions.history('tenant-a', 's')
    t.same(h.map((m) => m.seq), Array.from({ length: 40 }, (_, i) => i), 'seqs 0..39, contiguous')
    for (let i = 0; i < 20; i++) {
      const at = h.findIndex((m) => m.text === `q${i}`)
      t.equal(h[at + 1]?.text, `a${i}`, `exchange ${i} kept whole and in order`)
    }
  })

  t.test(`${engine.name}: an agent message is kept whole: content null, tool calls, tool results`, async (t) => {
    const s = await engine.open(t)
    const call = { role: 'assistant' as const, content: null, tool_calls: [{ id: 'call_1', type: 'function' as const, function: { name: 'f', arguments: '{"x":1}' } }] }
    const result = { role: 'tool' as const, tool_call_id: 'call_1', content: [{ type: 'text' as const, text: 'ok' }] }
    await s.sessions.appendExchange('tenant-a', 's', [{ role: 'user', content: 'go' }, call, result])
    const again = await s.reopen()
    const h = await again.sessions.history('tenant-a', 's')
    t.same(h[1]?.message, call)
    t.same(h[2]?.message, result)
  })

  t.test(`${engine.name}: odd session ids are refused as an invalid id (the API's 400), never a store failure`, async (t) => {
    const s = await engine.open(t)
    for (const odd of ['', 'a\u0000b', 'x'.repeat(5000)]) {
      await t.rejects(Promise.resolve().then(() => s.sessions.history('tenant-a', odd)), InvalidSessionIdError, `length ${odd.length}`)
      await t.rejects(Promise.resolve().then(() => s.sessions.appendExchange('tenant-a', odd, [{ role: 'user', content: 'x' }])), InvalidSessionIdError)
    }
    t.equal(await s.conversations.get('tenant-a', 'a\u0000b'), undefined, 'an odd conversation id is not found')
  })

  t.test(`${engine.name}: keys: created keys authenticate (also through another instance), revoked ones say so`, async (t) => {
    const s = await engine.open(t)
    const { key, record } = await s.keys.create('premium', 'conformance')
    const hash = hashKey(key)
    t.same(s.keys.lookup(hash), { id: record.tenant, plan: 'premium' })
    t.not(record.tenant, tenantIdFor(hash), 'a new key gets a tenant of its own, not one derived from the key')
    t.equal(await s.keys.countActive(), 1)
    t.same((await s.keys.list()).map((r) => [r.id, r.tenant, r.plan, r.label]), [[record.id, record.tenant, 'premium', 'conformance']])
    t.equal((await s.keys.get(record.id))?.tenant, record.tenant)
    t.equal(await s.keys.get('key_nope'), undefined)
    const other = await s.another()
    t.same(await lookup(other, hash), { id: record.tenant, plan: 'premium' }, 'the other instance finds the same tenant')
    t.equal(await lookup(other, hashKey('rg_not-a-key')), undefined)
    t.equal(await s.keys.revoke(record.id), true)
    t.equal(s.keys.lookup(hash), 'revoked', 'revoked: refused at once by the instance that revoked it, as revoked')
    t.equal(await lookup(await s.another(), hash), 'revoked', 'and by any instance')
    t.equal(await s.keys.revoke(record.id), false, 'a second revoke finds no active key')
    t.equal(await s.keys.countActive(), 0)
    t.ok((await s.keys.list())[0]?.revokedAt, 'the record stays, marked revoked')
  })

  t.test(`${engine.name}: keys: rotate gives the same tenant a new secret and revokes the old one at once`, async (t) => {
    const s = await engine.open(t)
    const first = await s.keys.create('pro', 'billing app')
    const other = await s.another()
    t.same(await lookup(other, hashKey(first.key)), { id: first.record.tenant, plan: 'pro' }, 'another instance has it cached')
    const rotated = await s.keys.rotate(first.record.id)
    if (rotated === undefined) throw new Error('rotate found no key')
    t.not(rotated.key, first.key)
    t.not(rotated.record.id, first.record.id, 'a new key id')
    t.match(rotated.record, { tenant: first.record.tenant, plan: 'pro', label: 'billing app' }, 'same tenant, plan and label')
    t.same(s.keys.lookup(hashKey(rotated.key)), { id: first.record.tenant, plan: 'pro' })
    t.equal(s.keys.lookup(hashKey(first.key)), 'revoked')
    await refreshed(other)
    t.same(await lookup(other, hashKey(rotated.key)), { id: first.record.tenant, plan: 'pro' }, 'the new key works on the other instance')
    t.equal(await lookup(other, hashKey(first.key)), 'revoked', 'the old one is refused there after its cache refresh')
    t.equal(await s.keys.rotate(first.record.id), undefined, 'a revoked key cannot be rotated again')
    t.equal(await s.keys.rotate('key_nope'), undefined)
    t.equal(await s.keys.countActive(), 1)
  })

  t.test(`${engine.name}: keys: set-plan moves a key to another plan, same tenant, seen by every instance`, async (t) => {
    const s = await engine.open(t)
    const { key, record } = await s.keys.create('free')
    const other = await s.another()
    t.same(await lookup(other, hashKey(key)), { id: record.tenant, plan: 'free' })
    const moved = await s.keys.setPlan(record.id, 'enterprise')
    t.match(moved, { id: record.id, tenant: record.tenant, plan: 'enterprise' })
    t.same(s.keys.lookup(hashKey(key)), { id: record.tenant, plan: 'enterprise' }, 'at once where it was changed')
    await refreshed(other)
    t.same(await lookup(other, hashKey(key)), { id: record.tenant, plan: 'enterprise' }, 'after the cache refresh elsewhere')
    t.equal(await s.keys.setPlan('key_nope', 'pro'), undefined)
    t.equal((await (await s.reopen()).keys.get(record.id))?.plan, 'enterprise', 'durable')
  })

  t.test(`${engine.name}: usage: adds sum per tenant, day and model, survive a reopen, and list by date range`, async (t) => {
    const s = await engine.open(t)
    const e = (tenant: string, date: string, model: string, n: number) => ({
      tenant,
      date,
      model,
      requests: 1,
      inputTokens: 10 * n,
      outputTokens: n,
      cachedTokens: n === 2 ? 5 : 0,
    })
    // One batch may name the same row twice (two requests between flushes).
    await s.usage.add([e('tenant-a', '2026-11-24', 'm/x', 1), e('tenant-a', '2026-11-25', 'm/x', 2), e('tenant-a', '2026-11-25', 'm/x', 3)])
    await s.usage.add([e('tenant-a', '2026-11-25', 'a/y', 1), e('tenant-b', '2026-11-25', 'm/x', 7)])
    await s.usage.add([])
    const again = await s.reopen()
    t.same(await again.usage.list('tenant-a', {}), [
      { date: '2026-11-24', model: 'm/x', requests: 1, inputTokens: 10, outputTokens: 1, cachedTokens: 0 },
      { date: '2026-11-25', model: 'a/y', requests: 1, inputTokens: 10, outputTokens: 1, cachedTokens: 0 },
      { date: '2026-11-25', model: 'm/x', requests: 2, inputTokens: 50, outputTokens: 5, cachedTokens: 5 },
    ], 'by date then model, sums per row')
    t.same((await again.usage.list('tenant-a', { from: '2026-11-25' })).map((r) => r.model), ['a/y', 'm/x'], 'from is inclusive')
    t.same((await again.usage.list('tenant-a', { to: '2026-11-24' })).map((r) => r.date), ['2026-11-24'], 'to is inclusive')
    t.same(await again.usage.list('tenant-a', { from: '2026-11-26' }), [])
    t.same((await again.usage.list('tenant-b', {})).map((r) => r.requests), [1], 'tenant-scoped')
    t.same(await again.usage.list('tenant-c', {}), [])
    const other = await again.another()
    await other.usage.add([e('tenant-b', '2026-11-25', 'm/x', 1)])
    t.same((await again.usage.list('tenant-b', {}))[0]?.requests, 2, "another instance's adds count toward the same row")
  })
}

function trace(id: string, createdAt: number, sessionId: string | null): RequestTrace {
  return wholeTrace({ id, createdAt, sessionId, messagesJson: JSON.stringify([{ role: 'user', content: `asked in ${id} \u0000 with a NUL` }]) })
}

for (const engine of testableEngines(t, 'request traces')) {
  t.test(`${engine.name}: request traces: newest first, bounded per tenant, by id, deleted with their session`, async (t) => {
    const s = await engine.open(t)
    const other = await s.another()
    await s.traces.append([{ tenant: 'tenant-a', trace: trace('req-1', 1000, 's1') }, { tenant: 'tenant-b', trace: trace('req-2', 1001, 's1') }], 3)
    await other.traces.append(
      [2, 3, 4, 5].map((i) => ({ tenant: 'tenant-a', trace: trace(`req-a${i}`, 1000 + i, i % 2 === 0 ? 's2' : 's1') })),
      3,
    )
    t.same((await s.traces.list('tenant-a', 3)).map((x) => x.id), ['req-a5', 'req-a4', 'req-a3'], "newest first, through either instance's writes")
    t.same((await s.traces.list('tenant-b', 3)).map((x) => x.id), ['req-2'], 'per tenant')
    const got = await other.traces.get('tenant-a', 'req-a4')
    t.same(JSON.parse(got?.messagesJson ?? 'null'), [{ role: 'user', content: 'asked in req-a4 \u0000 with a NUL' }], 'kept whole')
    t.equal(await s.traces.get('tenant-b', 'req-a4'), undefined, "another tenant's trace is not found")
    t.equal(await s.traces.get('tenant-a', 'a\u0000b'), undefined)
    // How many went depends on how eagerly the engine prunes beyond `keep`: req-a4 at least.
    t.ok((await s.traces.deleteSession('tenant-a', 's2')) >= 1, "the session's traces go")
    t.same((await other.traces.list('tenant-a', 10)).map((x) => x.id).filter((id) => id !== 'req-1'), ['req-a5', 'req-a3'])
    t.same((await s.traces.list('tenant-b', 3)).map((x) => x.id), ['req-2'], "another tenant's session of the same id stays")
  })
}
