/**
 * Long-term recall over a shared store, on every engine (test/helpers/store-engines.ts): turns saved through one
 * instance (a process on one DATA_DIR, or a replica on one PostgreSQL) are recalled through another on its next search,
 * from the change log its loaded index catches up from; pruned turns and a deleted session never come back through
 * either.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { TokenCounter } from '../src/context/tokenizer.js'
import { SessionRecall } from '../src/recall/session-recall.js'
import { LocalEmbedder } from '../src/retrieval/embedder.js'
import type { Stores } from '../src/storage/open-stores.js'
import type { ChatMessage } from '../src/types.js'
import { testableEngines } from './helpers/store-engines.js'

const counter = new TokenCounter({ margins: { '*': 0.1 } })
const FACT: ChatMessage[] = [
  { role: 'user', content: "My grandmother's cat is called Bartholomew and he only eats sardines." },
  { role: 'assistant', content: 'What a distinguished name for a cat!' },
]
const filler = (i: number): ChatMessage[] => [
  { role: 'user', content: `Quick note ${i} about the weather and the train.` },
  { role: 'assistant', content: `Noted point ${i} on the coffee.` },
]

for (const engine of testableEngines(t, 'long-term recall over a shared store')) {
  t.test(`${engine.name}: turns saved through one instance are recalled through another; prunes and deletes reach both`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'recall-replicas-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    const first = await engine.open(t, { maxMessagesPerSession: 12 })
    const second = await first.another()
    const recallOf = (stores: Stores, name: string): SessionRecall => {
      const r = new SessionRecall({ records: stores.recall, embedder: new LocalEmbedder(), counter, dataDir: join(dir, name), maxTokens: 4000, maxMessagesPerSession: 12 })
      t.teardown(() => r.close())
      return r
    }
    const a = recallOf(first, 'a')
    const b = recallOf(second, 'b')
    const recalled = async (r: SessionRecall, query: string): Promise<string> => {
      const c = await r.search('tenant-a', 'long', query, 2000)
      return c === undefined ? '' : [...c.ranked].map((seq) => c.turns.get(seq)?.content ?? '').join('\n')
    }

    await first.sessions.appendExchange('tenant-a', 'long', filler(0))
    t.notMatch(await recalled(b, 'Bartholomew'), /Bartholomew/, 'B has loaded the session before the fact')
    await first.sessions.appendExchange('tenant-a', 'long', FACT)
    t.match(await recalled(b, 'what does the cat Bartholomew eat'), /Bartholomew/, 'B recalls the turn A saved, on its next search')
    t.equal(await b.search('tenant-b', 'long', 'Bartholomew', 2000), undefined, "another tenant's session of the same id has nothing")

    // Saved through B: pruned out of the 12-message bound; A's loaded index follows.
    t.match(await recalled(a, 'Bartholomew sardines'), /Bartholomew/)
    for (let i = 1; i <= 6; i++) await second.sessions.appendExchange('tenant-a', 'long', filler(i))
    t.notMatch(await recalled(a, 'Bartholomew sardines'), /Bartholomew/, 'pruned through B: A never recalls it again')

    await second.sessions.appendExchange('tenant-a', 'long', FACT)
    t.match(await recalled(a, 'Bartholomew sardines'), /Bartholomew/)
    // A client that regenerates its last turn: the replaced seqs are unindexed and their new messages indexed.
    const last = (await first.sessions.history('tenant-a', 'long')).at(-2)?.seq ?? -1
    await second.sessions.appendExchange('tenant-a', 'long', [{ role: 'user', content: 'My neighbour keeps a parrot called Esmeralda.' }], { replaceFrom: last })
    t.notMatch(await recalled(a, 'Bartholomew sardines'), /Bartholomew/, 'a rewound turn is not recalled through A')
    t.match(await recalled(a, 'parrot Esmeralda'), /Esmeralda/, 'its replacement is')
    await second.sessions.appendExchange('tenant-a', 'long', FACT)
    t.ok(await first.sessions.delete('tenant-a', 'long'))
    t.equal(await b.search('tenant-a', 'long', 'Bartholomew sardines', 2000), undefined, 'deleted through A: B never recalls it')
    await second.sessions.appendExchange('tenant-a', 'long', filler(9))
    t.notMatch(await recalled(a, 'Bartholomew sardines'), /Bartholomew/, 'nor does the same id started again')
  })
}

for (const engine of testableEngines(t, 'long-term recall: odd saves')) {
  t.test(`${engine.name}: a save's turns pruned at once are not indexed; another embedder starts the namespace over`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'recall-odd-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    const stores = await engine.open(t, { maxMessagesPerSession: 2 })
    const recallWith = (records: Stores, embedder: LocalEmbedder, name: string): SessionRecall => {
      const r = new SessionRecall({ records: records.recall, embedder, counter, dataDir: join(dir, name), maxTokens: 4000, maxMessagesPerSession: 2 })
      t.teardown(() => r.close())
      return r
    }
    const first = recallWith(stores, new LocalEmbedder(), 'first')
    const recalled = async (r: SessionRecall, query: string): Promise<string> => {
      const c = await r.search('tenant-a', 's', query, 2000)
      return c === undefined ? '' : [...c.ranked].map((seq) => c.turns.get(seq)?.content ?? '').join('\n')
    }
    // Four messages into a 2-message bound: the first two are pruned by the save that brings them.
    const saved = await stores.sessions.appendExchange('tenant-a', 's', [...FACT, ...filler(1)])
    t.same(saved.map((m) => m.seq), [0, 1, 2, 3])
    t.same((await stores.sessions.history('tenant-a', 's')).map((m) => m.seq), [2, 3])
    t.notMatch(await recalled(first, 'Bartholomew sardines'), /Bartholomew/, 'pruned at once: never indexed')
    t.match(await recalled(first, 'weather train'), /weather/, 'the kept turns are')
    const meta = await stores.recall.index.meta(first.namespaceOf('tenant-a', 's'))
    t.match(meta, { count: 2, nextLabel: 2, version: 1 })

    // Saved through an instance with another embedder (another dimension): the namespace starts over under it.
    const another = await stores.another()
    const other = recallWith(another, new LocalEmbedder({ dimension: 128 }), 'other')
    await another.sessions.appendExchange('tenant-a', 's', FACT)
    const after = await stores.recall.index.meta(other.namespaceOf('tenant-a', 's'))
    t.match(after, { embedderId: 'local:hash-v1:128', dimension: 128, count: 2, version: 1 })
    t.not(after?.epoch, meta?.epoch, 'a new epoch')
    t.match(await recalled(other, 'Bartholomew sardines'), /Bartholomew/)
  })
}
