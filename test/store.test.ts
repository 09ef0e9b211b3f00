/**
 * The LMDB environment's write path: concurrent durable units share commits (group commit), which lmdb-js does by
 * itself (async transactions queued in one event turn run in one write transaction, flushed once); this guards it.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openStore } from '../src/storage/store.js'

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
