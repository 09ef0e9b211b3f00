/**
 * The usage recorder (src/usage/usage-recorder.ts) on its own, with a store that keeps what it is given: each request
 * counts toward the UTC day of its own instant, on either side of midnight and when the clock steps back.
 */
import t from 'tap'
import type { UsageEntry, UsageStore } from '../src/storage/interface.js'
import { UsageRecorder } from '../src/usage/usage-recorder.js'

t.test('requests on either side of a UTC midnight count toward their own days', async (t) => {
  const written: UsageEntry[] = []
  const store: Pick<UsageStore, 'add'> = { add: async (rows) => void written.push(...rows) }
  let now = Date.UTC(2026, 10, 25, 23, 59, 59, 999)
  const recorder = new UsageRecorder({ store: store as UsageStore, now: () => now, onError: (err) => t.fail(String(err)) })
  const record = () => recorder.record({ tenant: 't1', model: 'm', inputTokens: 1, outputTokens: 1, cachedTokens: 0 })
  record()
  now += 1 // 2026-11-26T00:00:00.000Z
  record()
  record()
  now = Date.UTC(2026, 10, 25, 12) // the clock set back
  record()
  now = Date.UTC(1969, 11, 31, 23) // before the epoch
  record()
  await recorder.flush()
  t.same(
    written.map((r) => [r.date, r.requests]),
    [
      ['2026-11-25', 2],
      ['2026-11-26', 2],
      ['1969-12-31', 1],
    ],
  )
})
