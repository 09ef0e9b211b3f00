/**
 * The LMDB environment's write path: concurrent durable units share commits (group commit), which lmdb-js does by
 * itself (async transactions queued in one event turn run in one write transaction, flushed once); this guards it.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { isStorageFull, openStore, StoreUnavailableError } from '../src/storage/store.js'
import { StoreCapacity } from '../src/storage/capacity.js'
import { classifyStoreFailure, classifyStoreFailureSync } from '../src/storage/store-errors.js'

const lastTxnId = (store: ReturnType<typeof openStore>): number => (store.root.getStats() as { lastTxnId: number }).lastTxnId

t.test('concurrent durable saves share commits instead of queueing one commit each', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'store-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const store = openStore({ dir })
  t.teardown(() => store.close())
  const save = (i: number) =>
    store.durable(() => {
      store.messages.put(['t', `s${i}`, 1], { role: 'user', text: `question ${i}` })
      store.messages.put(['t', `s${i}`, 2], { role: 'assistant', text: `answer ${i}` })
      store.sessions.put(['t', `s${i}`], { count: 2 })
      return i
    })
  const before = lastTxnId(store)
  t.same(await Promise.all(Array.from({ length: 32 }, (_, i) => save(i))), Array.from({ length: 32 }, (_, i) => i))
  const commits = lastTxnId(store) - before
  t.ok(commits >= 1 && commits <= 4, `32 concurrent saves took ${commits} commit(s)`)
  for (let i = 0; i < 32; i++) t.equal((store.messages.get(['t', `s${i}`, 2]) as { text: string }).text, `answer ${i}`)

  // One that throws rolls back alone: the others in its batch are kept.
  const results = await Promise.allSettled([
    save(100),
    store.durable(() => {
      store.messages.put(['t', 'bad', 1], { role: 'user', text: 'half' })
      throw new Error('refused')
    }),
    save(101),
  ])
  t.same(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled'])
  t.equal(store.messages.get(['t', 'bad', 1]), undefined, 'the failed unit left nothing')
  t.ok(store.messages.get(['t', 's101', 2]), 'its neighbours committed')
})

t.test('freshReads: a read sees what another opening of the directory committed a moment ago', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'recallgate-fresh-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  // Two openings of one directory stand for two processes on one DATA_DIR (`serve --workers`).
  const writer = openStore({ dir })
  const reader = openStore({ dir })
  t.teardown(async () => {
    await writer.close()
    await reader.close()
  })
  writer.meta.putSync('k', 1)
  await new Promise((r) => setTimeout(r, 5))
  t.equal(reader.meta.get('k'), 1)
  writer.meta.putSync('k', 2)
  // lmdb-js keeps its read transaction until a timer: within it, the other's commit is not seen.
  t.equal(reader.meta.get('k'), 1, 'without freshReads: the snapshot of the first read')
  reader.freshReads()
  t.equal(reader.meta.get('k'), 2, 'with it: the commit made before')
})

t.test('at its map size the store refuses writes but deletes, and takes writes again once data is deleted', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'store-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const store = openStore({ dir, mapSize: 1024 * 1024, spaceTtl: 0 })
  t.teardown(() => store.close())
  const big = 'x'.repeat(100_000)
  let i = 0
  let refused: unknown
  for (; i < 50 && refused === undefined; i++) {
    await store.durable(() => store.chunks.put(['t', `f${i}`, 0], { text: big })).catch((err: unknown) => (refused = err))
  }
  t.ok(refused instanceof StoreUnavailableError, `write ${i} refused with a StoreUnavailableError`)
  t.equal((refused as StoreUnavailableError).reason, 'map_full')
  t.ok(isStorageFull(refused), 'counted as a lack of space')
  t.equal(store.chunks.get(['t', `f${i - 1}`, 0]), undefined, 'the refused write left nothing')
  t.equal((store.chunks.get(['t', 'f0', 0]) as { text: string }).text, big, 'what was written before is read')
  for (let j = 0; j < i - 1; j++) await store.durable(() => store.chunks.remove(['t', `f${j}`, 0]), { releasing: true })
  await store.durable(() => store.chunks.put(['t', 'again', 0], { text: big }))
  t.ok(store.space().usedBytes < 1024 * 1024, 'room again after the deletes')
})

t.test('store failures are classified from their errno or LMDB code', async (t) => {
  t.equal(classifyStoreFailureSync(Object.assign(new Error('No space left'), { code: 28 })).reason, 'disk_full')
  t.equal(classifyStoreFailureSync(Object.assign(new Error('No space left'), { code: 'ENOSPC' })).reason, 'disk_full')
  t.equal(classifyStoreFailureSync(Object.assign(new Error('MDB_MAP_FULL'), { code: -30792 })).reason, 'map_full')
  t.equal(classifyStoreFailureSync(Object.assign(new Error('Input/output error'), { code: 5 })).reason, 'io_error')
  const panic = classifyStoreFailureSync(Object.assign(new Error('MDB_PANIC'), { code: -30795 }))
  t.equal(panic.reason, 'failing')
  t.notOk(isStorageFull(panic), 'a panic is not a lack of space')
  // lmdb-js's shape: the real error behind a promise on `commitError`.
  const commitError = Promise.reject(Object.assign(new Error('Input/output error'), { code: 5 }))
  const failed = await classifyStoreFailure(Object.assign(new Error('Commit failed (see commitError for details)'), { commitError }))
  t.equal(failed.reason, 'io_error')
  t.equal(failed.errno, 5)
})

t.test("a cache file gets the disk only with its own size twice over above MIN_FREE_DISK; the store's free pages do not count", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'store-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const store = openStore({ dir })
  t.teardown(() => store.close())
  let free = 10_000_000
  const capacity = new StoreCapacity({ store, dir, minFreeDisk: 1_000_000, clock: () => 0, ttl: 0, diskFree: async () => free })
  t.ok(await capacity.roomForCache(4_500_000), '4.5 MB: room (2 × 4.5 + 1 ≤ 10)')
  t.notOk(await capacity.roomForCache(4_600_000), '4.6 MB: no room')
  free = 0
  t.notOk(await capacity.roomForCache(1), 'a full filesystem has no room for a cache, whatever the store holds free inside its file')
})
