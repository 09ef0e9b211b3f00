/**
 * The two settings that shape a long session's prompt, through the gateway with the official SDK (README, Prompt
 * caching and Long-term recall): with HISTORY_STEP the kept history starts at a stored seq that is a multiple of the
 * step, so it moves in jumps and consecutive prompts share their start; RECALL_MAX_TOKENS bounds the recalled-turns
 * block whatever room the window leaves it. The model's window is small (the mock lists it), so a few dozen turns
 * overflow it. On every store engine (LMDB, and PostgreSQL when the test cluster is there): the seqs are the store's.
 */
import { encode } from 'gpt-tokenizer'
import type OpenAI from 'openai'
import t from 'tap'
import { RECALL_PREAMBLE } from '../src/recall/recall-block.js'
import { startHarness, type Harness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'

const MODEL = 'test/small-window'
const MOCK = { models: [{ id: MODEL, context_length: 2_000 }] }

interface Meta {
  memory: { historyMessages: number; recalledMessages: number }
}
type Sent = Array<{ role: string; content: string }>

/** One turn of session `sessionId`; the mock answers `Echo: <the message>`, and the gateway saves both. */
async function turn(client: OpenAI, sessionId: string, content: string): Promise<Meta> {
  const r = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content }], ...({ sessionId, useRAG: false } as object) })
  return (r as unknown as { _metadata: Meta })._metadata
}

const sent = (h: Harness): Sent => h.mock.lastChatBody()?.messages as Sent

// About 40 tokens a message: a 2,000-token window keeps a dozen exchanges.
const say = (i: number): string =>
  `turn ${i}: the shipping plan for project number ${i} covers crates, pallets, customs forms and the harbour schedule for that week.`

for (const engine of testableEngines(t, 'memory bounds')) {
  t.test(`${engine.name}: HISTORY_STEP: once the session overflows, the kept history starts at a multiple of the step and moves in steps`, async (t) => {
    const STEP = 8
    const h = await startHarness(t, { engine, env: { HISTORY_STEP: String(STEP), RECALL: 'off' }, mock: MOCK })
    const client = h.client()
    const starts: number[] = []
    for (let i = 0; i < 40; i++) {
      const meta = await turn(client, 'long', say(i))
      const messages = sent(h)
      t.equal(messages.at(-1)?.content, say(i), `turn ${i}: the request is sent last`)
      const history = messages.slice(0, -1)
      t.equal(history.length, meta.memory.historyMessages, `turn ${i}: _metadata counts the history sent`)
      // The session holds 2i messages (user at seq 2k, its reply at 2k + 1) before this turn.
      if (history.length === 2 * i) continue
      const first = /^turn (\d+):/.exec(history[0]?.content ?? '')
      t.ok(first, `turn ${i}: the kept history opens with a user turn`)
      const seq = 2 * Number(first?.[1])
      t.equal(seq % STEP, 0, `turn ${i}: the kept history starts at seq ${seq}, a multiple of ${STEP}`)
      if (starts.at(-1) !== seq) starts.push(seq)
    }
    t.ok(starts.length >= 2, `the start moved (${starts.join(', ')}), so the session was long enough to step`)
    t.same(
      starts,
      [...starts].sort((a, b) => a - b),
      'it only moves forward',
    )
    t.ok(
      starts.slice(1).every((s, k) => s - (starts[k] as number) >= STEP),
      'each move is at least one step, never one turn at a time',
    )
  })

  t.test(`${engine.name}: RECALL_MAX_TOKENS: the recalled-turns block never exceeds it, though the window would leave it more`, async (t) => {
    const BOUND = 150
    const h = await startHarness(t, { engine, env: { RECALL_MAX_TOKENS: String(BOUND) }, mock: MOCK })
    const blockTokens = async (client: OpenAI, i: number): Promise<number | undefined> => {
      const meta = await turn(client, 'recall', say(i))
      const block = sent(h).find((m) => m.role === 'user' && m.content.startsWith(RECALL_PREAMBLE))
      t.equal(block !== undefined, meta.memory.recalledMessages > 0, `turn ${i}: a block is sent exactly when _metadata counts recalled messages`)
      return block === undefined ? undefined : encode(block.content).length
    }

    let client = h.client()
    const sizes: number[] = []
    for (let i = 0; i < 36; i++) {
      const n = await blockTokens(client, i)
      if (n !== undefined) sizes.push(n)
    }
    t.ok(sizes.length > 0, 'the session overflowed its window and older turns were recalled')
    t.ok(
      sizes.every((n) => n <= BOUND),
      `every block within RECALL_MAX_TOKENS=${BOUND} (${Math.max(...sizes)} tokens at most)`,
    )

    // The same session with a looser bound: the window gives the block more room, so the bound above was binding.
    await h.restart({ RECALL_MAX_TOKENS: '1500' })
    client = h.client()
    const looser = await blockTokens(client, 36)
    t.ok(looser !== undefined && looser > BOUND, `with RECALL_MAX_TOKENS=1500 the block takes ${looser} tokens`)
  })
}
