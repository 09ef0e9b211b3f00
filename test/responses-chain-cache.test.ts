/**
 * The walked-chain cache (responses/state.ts) against real stores, each engine: a chain cached by one instance loses a
 * turn deleted through another instance (another process on one LMDB directory, another replica on one PostgreSQL)
 * from that instance's next walk on, and a delete elsewhere in the tenant leaves the cached chain whole.
 */
import t from 'tap'
import { ChainCache, walkChain } from '../src/responses/state.js'
import type { StoredResponse } from '../src/storage/interface.js'
import { testableEngines } from './helpers/store-engines.js'

function turn(id: string, previous: string | null, text: string): StoredResponse {
  return {
    id,
    createdAt: 1000,
    completedAt: 1001,
    model: 'openai/gpt-4o',
    status: 'completed',
    previousResponseId: previous,
    conversationId: null,
    input: [{ type: 'message', id: `in_${id}`, role: 'user', content: text }],
    output: [{ type: 'message', id: `out_${id}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: `re ${text}`, annotations: [] }] }],
    messages: [
      { message: { role: 'user', content: text }, tokens: 2 },
      { message: { role: 'assistant', content: `re ${text}` }, tokens: 2 },
    ],
    usage: null,
    error: null,
    incompleteDetails: null,
    echo: {},
  }
}

const users = (history: readonly { message: { role: string; content?: unknown } }[]): unknown[] =>
  history.filter((m) => m.message.role === 'user').map((m) => m.message.content)

for (const engine of testableEngines(t, 'the walked-chain cache across instances')) {
  t.test(`${engine.name}: a cached chain follows deletes made through another instance`, async (t) => {
    const here = await engine.open(t)
    const there = await here.another()
    const cache = new ChainCache(1000)
    const tenant = 'tenant-a'
    await here.responses.save(tenant, turn('resp_1', null, 'one'))
    await here.responses.save(tenant, turn('resp_2', 'resp_1', 'two'))
    await here.responses.save(tenant, turn('resp_3', 'resp_2', 'three'))
    await here.responses.save(tenant, turn('resp_x', null, 'unrelated'))
    const walk = async (): Promise<unknown[]> => users((await walkChain(here.responses, tenant, 'resp_3', 100, cache)).history)
    t.same(await walk(), ['one', 'two', 'three'], 'walked')
    t.same(await walk(), ['one', 'two', 'three'], 'from the cache')

    await there.responses.delete(tenant, 'resp_x')
    t.same(await walk(), ['one', 'two', 'three'], 'a delete of another response of the tenant leaves the chain whole')
    t.same(await walk(), ['one', 'two', 'three'], 'and the cache keeps serving it')

    await there.responses.delete('tenant-b', 'resp_2')
    t.same(await walk(), ['one', 'two', 'three'], "another tenant's delete (of nothing) changes nothing")

    await there.responses.delete(tenant, 'resp_2')
    t.same(await walk(), ['three'], 'a turn deleted through the other instance ends the chain there, on the next walk')
    t.same(await walk(), ['three'], 'and after')
  })
}
