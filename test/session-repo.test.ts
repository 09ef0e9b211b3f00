import t, { type Test } from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { encode } from 'gpt-tokenizer'
import { TokenCounter } from '../src/context/tokenizer.js'
import { storeFailure } from '../src/http/store-failure.js'
import { SessionRepo, type SessionRepoOptions, type StoredMessage } from '../src/storage/session-repo.js'
import { openStore, type Store } from '../src/storage/store.js'
import type { ChatMessage } from '../src/types.js'

const counter = new TokenCounter({ margins: { '*': 0.1 } })

/** A clock the test moves by hand. */
function manualClock(start = 1_700_000_000_000): { now: () => number; advance: (ms: number) => void } {
  let now = start
  return { now: () => now, advance: (ms) => (now += ms) }
}

function setup(
  t: Test,
  opts: Partial<SessionRepoOptions> = {},
): { store: Store; repo: SessionRepo; dir: string; clock: ReturnType<typeof manualClock> } {
  const dir = t.testdir()
  const store = openStore({ dir })
  t.teardown(() => store.close())
  const clock = manualClock()
  const repo = new SessionRepo(store, { maxMessagesPerSession: 1000, clock: clock.now, counter, ...opts })
  return { store, repo, dir, clock }
}

const exchange = (i: number): ChatMessage[] => [
  { role: 'user', content: `question ${i}` },
  { role: 'assistant', content: `answer ${i}` },
]

const contents = (ms: readonly StoredMessage[]): string[] => ms.map((m) => m.text)

/** What a bad session id must throw: a 400 that names the field. */
/** storage/ refuses with its own error; the HTTP layer's answer to it is checked below (storeFailure). */
const sessionIdError = { name: 'InvalidSessionIdError' }

// Child mode for the crash test: append exchanges as fast as possible and report each one that resolved.
const crashDir = process.env.RG_SESSION_CRASH_DIR
if (crashDir !== undefined) {
  const store = openStore({ dir: crashDir })
  const repo = new SessionRepo(store, { maxMessagesPerSession: 1_000_000, clock: Date.now, counter })
  let i = 0
  const writer = async (): Promise<void> => {
    for (;;) {
      const n = i++
      await repo.appendExchange('tenant', 'crash', [
        { role: 'user', content: `u${n} ${'pad '.repeat(n % 50)}` },
        { role: 'assistant', content: `a${n}` },
        { role: 'user', content: `x${n}` },
      ])
      process.stdout.write(`ack ${n}\n`)
    }
  }
  // Several writers in flight so commits batch several exchanges, as under load.
  await Promise.all([writer(), writer(), writer(), writer()])
} else {
  tests()
}

function tests(): void {
  t.test('append, history, get', async (t) => {
    const { repo, clock } = setup(t)
    t.same(repo.history('t1', 's'), [])
    t.equal(repo.get('t1', 's'), undefined)

    const saved = await repo.appendExchange('t1', 's', exchange(0))
    t.same(
      saved.map((m) => [m.seq, m.role, m.text]),
      [
        [0, 'user', 'question 0'],
        [1, 'assistant', 'answer 0'],
      ],
    )
    t.equal(saved[0]?.tokens, encode('question 0').length, 'content tokens counted with o200k at write time')
    t.equal(saved[0]?.createdAt, clock.now())

    clock.advance(5000)
    await repo.appendExchange('t1', 's', [
      { role: 'user', content: 'long <|endoftext|> text' },
      ...exchange(1).slice(1),
    ])
    t.same(contents(repo.history('t1', 's')), ['question 0', 'answer 0', 'long <|endoftext|> text', 'answer 1'])
    t.same(
      contents(repo.history('t1', 's', 3)),
      ['answer 0', 'long <|endoftext|> text', 'answer 1'],
      'the newest, oldest first',
    )
    t.same(repo.history('t1', 's', 0), [])
    t.same(repo.get('t1', 's'), { id: 's', createdAt: clock.now() - 5000, updatedAt: clock.now(), messageCount: 4 })

    t.same(await repo.appendExchange('t1', 's', []), [], 'nothing to save is a no-op')
    await t.rejects(repo.appendExchange('t1', 's', [{ role: 'system', content: 'x' }]), TypeError)
    t.equal(repo.get('t1', 's')?.messageCount, 4)
  })

  t.test('history results cannot corrupt the cache', async (t) => {
    const { repo } = setup(t)
    await repo.appendExchange('t', 's', exchange(0))
    const h = repo.history('t', 's')
    h.pop()
    t.throws(() => {
      ;(h[0] as unknown as { text: string }).text = 'changed'
    })
    t.same(contents(repo.history('t', 's')), ['question 0', 'answer 0'])
  })

  t.test('pruning keeps the newest maxMessagesPerSession and tells the hooks', async (t) => {
    const { repo, store } = setup(t, { maxMessagesPerSession: 5 })
    const prunedSeen: number[] = []
    repo.onAppend((_t, _s, _saved, pruned) => prunedSeen.push(...pruned.map((m) => m.seq)))
    for (let i = 0; i < 4; i++) await repo.appendExchange('t', 's', exchange(i))
    const h = repo.history('t', 's')
    t.same(contents(h), ['answer 1', 'question 2', 'answer 2', 'question 3', 'answer 3'])
    t.same(
      h.map((m) => m.seq),
      [3, 4, 5, 6, 7],
    )
    t.same(prunedSeen, [0, 1, 2])
    t.equal(repo.get('t', 's')?.messageCount, 5)
    const rawKeys = [...store.messages.getKeys({ start: ['t'], end: ['t', Uint8Array.of(0xff)] })]
    t.equal(rawKeys.length, 5, 'pruned records are gone from LMDB')
  })

  t.test('close and reopen the same directory keeps everything', async (t) => {
    const dir = t.testdir()
    const clock = manualClock()
    let store = openStore({ dir })
    let repo = new SessionRepo(store, { maxMessagesPerSession: 100, clock: clock.now, counter })
    for (let i = 0; i < 3; i++) await repo.appendExchange('t', 'kept', exchange(i))
    await repo.appendExchange('t', 'other', exchange(9))
    await repo.appendExchange('t', 'gone', exchange(9))
    t.ok(await repo.delete('t', 'gone'))
    const before = repo.history('t', 'kept')
    await store.close()

    store = openStore({ dir })
    t.teardown(() => store.close())
    repo = new SessionRepo(store, { maxMessagesPerSession: 100, clock: clock.now, counter })
    t.same(repo.history('t', 'kept'), before)
    t.same(
      repo.list('t', { limit: 10 }).data.map((s) => [s.id, s.messageCount]),
      // Created in the same (hand-held) millisecond: newest first ties by id, descending.
      [
        ['other', 2],
        ['kept', 6],
      ],
    )
    const more = await repo.appendExchange('t', 'kept', exchange(3))
    t.same(
      more.map((m) => m.seq),
      [6, 7],
      'seqs continue after a restart',
    )
  })

  t.test('two tenants with the same sessionId never see each other', async (t) => {
    const { repo } = setup(t)
    await repo.appendExchange('tenant-a', 'shared', [{ role: 'user', content: 'secret of a' }])
    await repo.appendExchange('tenant-b', 'shared', [{ role: 'user', content: 'secret of b' }])
    // A tenant id that is a prefix of another must not see its keys either.
    await repo.appendExchange('tenant', 'shared', [{ role: 'user', content: 'secret of the prefix' }])
    t.same(contents(repo.history('tenant-a', 'shared')), ['secret of a'])
    t.same(contents(repo.history('tenant-b', 'shared')), ['secret of b'])
    t.same(contents(repo.history('tenant', 'shared')), ['secret of the prefix'])
    t.same(
      repo.list('tenant', { limit: 10 }).data.map((s) => s.id),
      ['shared'],
    )
    t.same(repo.history('tenant-c', 'shared'), [])
    t.equal(repo.get('tenant-c', 'shared'), undefined)
    t.equal(await repo.delete('tenant-c', 'shared'), false)
    t.ok(await repo.delete('tenant-a', 'shared'))
    t.same(contents(repo.history('tenant-b', 'shared')), ['secret of b'], "deleting a's session leaves b's")
  })

  t.test('a DATA_DIR from before the creation-time index lists its sessions newest first after a reopen', async (t) => {
    const dir = t.testdir()
    const clock = manualClock()
    let store = openStore({ dir })
    let repo = new SessionRepo(store, { maxMessagesPerSession: 100, clock: clock.now, counter })
    for (const id of ['first', 'second', 'third']) {
      await repo.appendExchange('t', id, exchange(0))
      clock.advance(1000)
    }
    // What an older version left: sessions, but no index and no mark that it was built.
    store.transactionSync(() => {
      for (const { key } of store.sessionTimes.getRange()) void store.sessionTimes.remove(key)
      void store.meta.remove('sessionTimesIndexed')
    })
    await store.close()
    store = openStore({ dir })
    t.teardown(() => store.close())
    repo = new SessionRepo(store, { maxMessagesPerSession: 100, clock: clock.now, counter })
    t.same(repo.list('t', { limit: 10 }).data.map((s) => s.id), ['third', 'second', 'first'])
  })

  t.test('weird ids: slashes, spaces, unicode, prefixes of each other, long', async (t) => {
    const { repo } = setup(t)
    const ids = ['a', 'a b', 'a/b', 'a/b/', '../etc/passwd', ' ', 'ünïcødé 🦜', '日本語のセッション']
    ids.push('x'.repeat(300), '😀'.repeat(200))
    for (const [i, id] of ids.entries()) await repo.appendExchange('t', id, [{ role: 'user', content: `message ${i}` }])
    for (const [i, id] of ids.entries()) {
      t.same(contents(repo.history('t', id)), [`message ${i}`], JSON.stringify(id).slice(0, 40))
      t.equal(repo.get('t', id)?.id, id)
    }
    const listed = repo.list('t', { limit: 100 }).data.map((s) => s.id)
    // All created in the same (hand-held) millisecond: the newest-first order ties by id, code point order descending.
    t.same(listed, [...ids].sort(codePointCompare).reverse(), 'list returns every id intact, in code point order')

    for (const bad of ['', '\u0000', 'a\u0000b', 'tab\there', '\ud800', 'x\udc00y', 'é'.repeat(1000)]) {
      t.throws(() => repo.history('t', bad), sessionIdError, JSON.stringify(bad).slice(0, 20))
      await t.rejects(repo.appendExchange('t', bad, exchange(0)), sessionIdError)
      let refused: unknown
      try {
        repo.history('t', bad)
      } catch (err) {
        refused = err
      }
      t.match(storeFailure(refused), { status: 400, code: 'invalid_parameter', param: 'sessionId' }, 'the HTTP answer: a 400 naming sessionId')
    }
    t.doesNotThrow(() => repo.history('t', '\ud83d\ude00'), 'a proper surrogate pair is fine')
  })

  t.test('list pages through sessions newest first', async (t) => {
    const { repo, clock } = setup(t)
    const ids = Array.from({ length: 7 }, (_, i) => `s${i}`)
    for (const id of [...ids].reverse()) {
      clock.advance(1000)
      await repo.appendExchange('t', id, exchange(0))
    }
    const seen: string[] = []
    let after: string | undefined
    let pages = 0
    for (;;) {
      const page = repo.list('t', { limit: 3, after })
      pages++
      seen.push(...page.data.map((s) => s.id))
      t.ok(page.data.length <= 3)
      if (!page.hasMore) break
      after = page.data.at(-1)?.id
    }
    t.same(seen, ids)
    t.equal(pages, 3)
    const first = repo.list('t', { limit: 1 }).data[0]
    t.same(first, { id: 's0', createdAt: clock.now(), updatedAt: clock.now(), messageCount: 2 })
    t.same(repo.list('t', { limit: 7 }), { data: repo.list('t', { limit: 100 }).data, hasMore: false })
    t.same(repo.list('t', { limit: 10, after: 's6' }), { data: [], hasMore: false })
    t.same(repo.list('t', { limit: 2, after: 's2x' }), { data: [], hasMore: false }, 'an after that names no session ends the list')
    t.same(repo.list('nobody', { limit: 10 }), { data: [], hasMore: false })
  })

  t.test('delete removes the session, its messages and cache; hooks run', async (t) => {
    const { repo, store } = setup(t)
    const deleted: string[] = []
    repo.onDelete((tenant, id) => {
      // Runs before removal, inside the transaction: the messages can still be read.
      deleted.push(`${tenant}:${id}:${repo.history(tenant, id).length}`)
    })
    for (let i = 0; i < 3; i++) await repo.appendExchange('t', 's', exchange(i))
    await repo.appendExchange('t', 's2', exchange(0))
    repo.history('t', 's') // cached
    t.equal(await repo.delete('t', 's'), true)
    t.equal(await repo.delete('t', 's'), false)
    t.same(deleted, ['t:s:6'])
    t.same(repo.history('t', 's'), [])
    t.equal(repo.get('t', 's'), undefined)
    t.same(
      repo.list('t', { limit: 10 }).data.map((s) => s.id),
      ['s2'],
    )
    const left = [...store.messages.getKeys({ start: ['t', 's'], end: ['t', 's', Uint8Array.of(0xff)] })]
    t.same(left, [], 'no message record left behind')

    const again = await repo.appendExchange('t', 's', exchange(7))
    t.same(contents(again), ['question 7', 'answer 7'])
    t.same(contents(repo.history('t', 's')), ['question 7', 'answer 7'], 'a new session with the same id starts empty')
  })

  t.test('hooks run in the same transaction: a throwing hook saves nothing', async (t) => {
    const { repo, store } = setup(t)
    let fail = false
    const seenByHook: number[] = []
    repo.onAppend((tenant, id, saved) => {
      store.meta.put(['indexed', tenant, id], saved.length)
      // Inside the transaction a hook reads the uncommitted state, which must not leak into the cache.
      seenByHook.push(repo.history(tenant, id).length)
      if (fail) throw new Error('index failed')
    })
    await repo.appendExchange('t', 's', exchange(0))
    t.equal(store.meta.get(['indexed', 't', 's']), 2, 'the hook write committed with the exchange')
    repo.history('t', 's')

    fail = true
    await t.rejects(repo.appendExchange('t', 's', exchange(1)), /index failed/)
    await t.rejects(repo.appendExchange('t', 'new', exchange(1)), /index failed/)
    fail = false
    t.same(contents(repo.history('t', 's')), ['question 0', 'answer 0'])
    t.equal(repo.get('t', 's')?.messageCount, 2)
    t.equal(repo.get('t', 'new'), undefined, 'the session was not created')
    t.equal(store.meta.get(['indexed', 't', 'new']), undefined, "the hook's own write was rolled back")
    t.same(seenByHook, [2, 4, 2], 'the hook saw its own transaction')

    const next = await repo.appendExchange('t', 's', exchange(2))
    t.same(
      next.map((m) => m.seq),
      [2, 3],
      'no seq was consumed by the failed append',
    )
  })

  t.test('concurrent appends to one session never collide', async (t) => {
    const { repo } = setup(t)
    const results = await Promise.all(Array.from({ length: 25 }, (_, i) => repo.appendExchange('t', 's', exchange(i))))
    const h = repo.history('t', 's')
    t.equal(h.length, 50)
    t.same(
      h.map((m) => m.seq),
      Array.from({ length: 50 }, (_, i) => i),
    )
    for (const [i, saved] of results.entries()) {
      const [u, a] = saved
      t.ok(u !== undefined && a !== undefined && a.seq === u.seq + 1, `exchange ${i} is contiguous`)
      t.equal(h[u?.seq ?? -1]?.text, `question ${i}`)
    }
  })

  t.test('the cache always agrees with LMDB (random operations)', async (t) => {
    const dir = t.testdir()
    const store = openStore({ dir })
    t.teardown(() => store.close())
    const clock = manualClock()
    let run = 0
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.oneof(
            fc.record({
              op: fc.constant('append' as const),
              n: fc.integer({ min: 1, max: 3 }),
              parallel: fc.boolean(),
            }),
            fc.record({ op: fc.constant('read' as const), limit: fc.option(fc.integer({ min: 0, max: 9 })) }),
            fc.record({ op: fc.constant('delete' as const) }),
          ),
          { maxLength: 12 },
        ),
        // Cache smaller and larger than the session limit: pruning must show through either way.
        fc.constantFrom(2, 4, 10),
        async (ops, perSession) => {
          const tenant = `run${run++}`
          const opts = { maxMessagesPerSession: 6, clock: clock.now, counter }
          const cached = new SessionRepo(store, { ...opts, cacheMessagesPerSession: perSession })
          const truth = new SessionRepo(store, { ...opts, cacheSessions: 0 })
          let k = 0
          for (const o of ops) {
            if (o.op === 'append') {
              const make = (): ChatMessage[] =>
                Array.from({ length: o.n }, () => ({ role: 'user' as const, content: `m${k++}` }))
              // Two appends racing, with a read in between that fills the cache mid-commit.
              if (o.parallel) {
                const first = cached.appendExchange(tenant, 's', make())
                const second = cached.appendExchange(tenant, 's', make())
                cached.history(tenant, 's', 2)
                // Read after the first resolves: the second may be committed but not yet patched in.
                await first.then(() => cached.history(tenant, 's'))
                await second
              } else await cached.appendExchange(tenant, 's', make())
            } else if (o.op === 'delete') {
              await cached.delete(tenant, 's')
            }
            const limit = o.op === 'read' && o.limit !== null ? o.limit : undefined
            const agree = (n: number | undefined): boolean =>
              JSON.stringify(cached.history(tenant, 's', n)) === JSON.stringify(truth.history(tenant, 's', n))
            if (!agree(limit) || !agree(3)) return false
          }
          return true
        },
      ),
      { numRuns: 60 },
    )
    t.pass('60 random operation sequences agree')
  })

  t.test('kill -9 at any moment leaves whole exchanges only, and every acknowledged one', async (t) => {
    const dir = t.testdir()
    const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url)], {
      env: { ...process.env, RG_SESSION_CRASH_DIR: dir },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const acked = new Set<number>()
    let buffered = ''
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (chunk: string) => {
      buffered += chunk
      const lines = buffered.split('\n')
      buffered = lines.pop() ?? ''
      for (const line of lines) if (line.startsWith('ack ')) acked.add(Number(line.slice(4)))
      if (acked.size >= 100 && child.exitCode === null && !child.killed) child.kill('SIGKILL')
    })
    // Bounded: a writer that never reaches 100 acknowledged exchanges is killed after 120 s, and the test says so.
    let stuck = false
    const guard = setTimeout(() => {
      stuck = true
      child.kill('SIGKILL')
    }, 120_000)
    const [, signal] = (await once(child, 'exit')) as [number | null, string | null]
    clearTimeout(guard)
    t.notOk(stuck, `the writer acknowledged 100 exchanges (it had ${acked.size} after 120 s)`)
    t.equal(signal, 'SIGKILL', 'killed mid-write')

    const store = openStore({ dir })
    t.teardown(() => store.close())
    const repo = new SessionRepo(store, { maxMessagesPerSession: 1_000_000, clock: Date.now, counter })
    const h = repo.history('tenant', 'crash')
    t.equal(h.length % 3, 0, `${h.length} messages: no torn exchange`)
    t.same(
      h.map((m) => m.seq),
      h.map((_, i) => i),
      'seqs contiguous',
    )
    const present = new Set<number>()
    let whole = true
    for (let i = 0; i + 2 < h.length; i += 3) {
      const n = Number(h[i]?.text.split(' ')[0]?.slice(1))
      whole &&= h[i + 1]?.text === `a${n}` && h[i + 2]?.text === `x${n}`
      present.add(n)
    }
    t.ok(whole, 'each stored exchange is complete and in order')
    t.ok([...acked].every((n) => present.has(n)), `all ${acked.size} acknowledged exchanges survived`)
    t.equal(repo.get('tenant', 'crash')?.messageCount, h.length)
  })
}

function codePointCompare(a: string, b: string): number {
  const x = [...a].map((c) => c.codePointAt(0) ?? 0)
  const y = [...b].map((c) => c.codePointAt(0) ?? 0)
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return (x[i] ?? 0) - (y[i] ?? 0)
  return x.length - y.length
}
