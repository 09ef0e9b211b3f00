/**
 * The store contract (src/storage/interface.ts), one test file run against every engine: LMDB today, PostgreSQL when
 * it lands (add it to `engines`). Each case asserts what a caller of the interface relies on, nothing engine-specific.
 */
import t, { type Test } from 'tap'
import { TokenCounter } from '../src/context/tokenizer.js'
import { ConversationRepo } from '../src/storage/conversation-repo.js'
import type { ConversationStore, ResponseStore, SessionStore, StoredItem, StoredResponse } from '../src/storage/interface.js'
import { ResponseRepo } from '../src/storage/response-repo.js'
import { SessionRepo } from '../src/storage/session-repo.js'
import { openStore } from '../src/storage/store.js'

interface Engine {
  name: string
  open(t: Test): Promise<{ sessions: SessionStore; responses: ResponseStore; conversations: ConversationStore; reopen(): Promise<{ sessions: SessionStore; responses: ResponseStore; conversations: ConversationStore }> }>
}

const counter = new TokenCounter({ margins: { '*': 0.1 } })

const lmdb: Engine = {
  name: 'lmdb',
  async open(t) {
    const dir = t.testdir()
    const make = (): { sessions: SessionStore; responses: ResponseStore; conversations: ConversationStore } => {
      const store = openStore({ dir })
      t.teardown(() => store.close())
      current = store
      return {
        sessions: new SessionRepo(store, { maxMessagesPerSession: 1000, clock: () => 1_700_000_000_000, counter }),
        responses: new ResponseRepo(store),
        conversations: new ConversationRepo(store),
      }
    }
    let current: ReturnType<typeof openStore> | undefined
    return {
      ...make(),
      reopen: async () => {
        await current?.close()
        return make()
      },
    }
  },
}

const engines: Engine[] = [lmdb]

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

for (const engine of engines) {
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
    for (const odd of ['', 'x'.repeat(5000), 'a\u0000b'])
      t.equal(await s.responses.get('tenant-a', odd), undefined, `id of length ${odd.length}`)
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
}
