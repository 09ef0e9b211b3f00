import t from 'tap'
import fc from 'fast-check'
import { FC_SEED_OVERRIDE } from './helpers/fc-seed.js'
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base'
import { encodeChat } from 'gpt-tokenizer'
import { pack, type PackInput, type RetrievalInput } from '../src/context/packer.js'
import { TokenCounter } from '../src/context/tokenizer.js'
import { pairingError } from '../src/mock-upstream/content.js'
import { storedMessage } from '../src/messages/stored-message.js'
import type { StoredMessage } from '../src/storage/session-repo.js'
import type { ChatMessage, Role } from '../src/types.js'

const AS_TEXT = { disallowedSpecial: new Set<string>() }
const counter = new TokenCounter({ margins: { openai: 0, '*': 0.1 } })
const MODEL = 'openai/gpt-4o'

function stored(seq: number, role: 'user' | 'assistant', content: string): StoredMessage {
  return storedMessage(seq, { role, content }, counter.textTokens(content), 0)
}

/** gpt-tokenizer's chat type (string content): what these chats are. */
type Chat = Parameters<typeof encodeChat>[0]

/** Alternating user/assistant turns, `n` messages. */
function conversation(n: number, word = 'turn'): StoredMessage[] {
  return Array.from({ length: n }, (_, i) => stored(i, i % 2 === 0 ? 'user' : 'assistant', `${word} ${i}`))
}

function retrieval(texts: string[], budget: number): RetrievalInput & { calls: number[][] } {
  const calls: number[][] = []
  return {
    calls,
    candidates: texts.map((text) => ({ tokens: counter.textTokens(text) })),
    budget,
    render: (selected) => {
      calls.push([...selected])
      const body = selected.map((i, n) => `[${n + 1}] source: file-${i}.md\n${texts[i] ?? ''}`).join('\n\n')
      return { role: 'system', content: `Relevant excerpts from the user's files:\n\n${body}` }
    },
  }
}

function input(overrides: Partial<PackInput>, model = MODEL): PackInput {
  return {
    window: 128_000,
    reserve: 1000,
    requestSystem: [],
    requestOther: [{ role: 'user', content: 'What did we talk about?' }],
    history: [],
    maxHistoryMessages: 400,
    messageTokens: (m) => counter.messageTokens(m, model),
    historyMessageTokens: (m) => counter.storedMessageTokens(m, model),
    chatOverhead: counter.chatOverhead(model),
    ...overrides,
  }
}

const contentArb = fc.oneof(
  { weight: 4, arbitrary: fc.lorem({ maxCount: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 60 }) },
  { weight: 1, arbitrary: fc.constantFrom('<|endoftext|>', '<|im_start|>user<|im_sep|>', '') },
)
const historyArb = fc
  .array(fc.record({ role: fc.constantFrom<'user' | 'assistant'>('user', 'assistant'), content: contentArb }), {
    maxLength: 40,
  })
  .map((ms) => ms.map((m, i) => stored(i, m.role, m.content)))

const caseArb = fc.record({
  system: fc.array(contentArb, { maxLength: 2 }),
  other: fc.array(fc.record({ role: fc.constantFrom<Role>('user', 'assistant'), content: contentArb }), {
    minLength: 1,
    maxLength: 3,
  }),
  history: historyArb,
  chunks: fc.option(fc.array(fc.lorem({ maxCount: 60 }), { maxLength: 6 })),
  chunkBudget: fc.integer({ min: 0, max: 400 }),
  window: fc.integer({ min: 50, max: 3000 }),
  reserve: fc.integer({ min: 0, max: 300 }),
  maxHistoryMessages: fc.integer({ min: 0, max: 50 }),
})

t.test('totalTokens is the exact encodeChat count, and every packing rule holds (random chats)', async (t) => {
  for (const [model, count] of [
    [MODEL, (ms: ChatMessage[]) => encodeChat(ms as Chat, 'gpt-4o', AS_TEXT).length],
    // History is stored with o200k counts; a cl100k model must still come out exact.
    ['openai/gpt-3.5-turbo', (ms: ChatMessage[]) => cl100k.encodeChat(ms as Chat, 'gpt-3.5-turbo', AS_TEXT).length],
  ] as const) {
    let packed = 0
    let cut = 0
    let withHistory = 0
    let withChunks = 0
    fc.assert(
      fc.property(caseArb, (c) => {
        const requestSystem = c.system.map((content): ChatMessage => ({ role: 'system', content }))
        const r = c.chunks === null ? undefined : retrieval(c.chunks, c.chunkBudget)
        const inp = input(
          {
            window: c.window,
            reserve: c.reserve,
            requestSystem,
            requestOther: c.other,
            history: c.history,
            maxHistoryMessages: c.maxHistoryMessages,
            retrieval: r,
          },
          model,
        )
        let res
        try {
          res = pack(inp)
        } catch (err) {
          // Only allowed when the request alone does not fit.
          return (
            (err as { code?: string }).code === 'context_length_exceeded' &&
            counter.chatTokens([...requestSystem, ...c.other], model) + c.reserve > c.window
          )
        }
        packed++
        if (res.truncated) cut++
        if (res.includedHistory > 0) withHistory++
        if (res.includedChunks > 0) withChunks++
        const ms = res.messages
        if (res.totalTokens !== count(ms) || res.totalTokens + c.reserve > c.window) return false

        // Order: system first, then history, the retrieval message right before the request's others, last.
        const head = ms.slice(0, requestSystem.length)
        const last = ms.slice(ms.length - c.other.length)
        if (JSON.stringify(head) !== JSON.stringify(requestSystem) || JSON.stringify(last) !== JSON.stringify(c.other))
          return false
        const chunkMsgs = res.includedChunks > 0 ? 1 : 0
        const hist = ms.slice(requestSystem.length, ms.length - c.other.length - chunkMsgs)
        if (hist.length !== res.includedHistory || res.includedHistory > c.maxHistoryMessages) return false

        // History: the newest suffix, never opening with an assistant turn (a split pair or an orphaned reply).
        const start = c.history.length - hist.length
        const suffix = c.history.slice(start).map((m) => m.message)
        if (JSON.stringify(hist) !== JSON.stringify(suffix)) return false
        if (hist[0]?.role === 'assistant') return false

        // Chunks: within budget, best-first order, and the message is the one rendered for them.
        if (r !== undefined && res.includedChunks > 0) {
          if (counter.messageTokens(ms[ms.length - c.other.length - 1] as ChatMessage, model) > c.chunkBudget) return false
          const sorted = [...res.selectedChunks].sort((a, b) => a - b)
          if (JSON.stringify(sorted) !== JSON.stringify(res.selectedChunks)) return false
          if (r.calls.some((call) => call.length === 0)) return false
        }
        // Honest truncation flag: set exactly when some available history or chunk was left out for the budget.
        const chunksLeft = r !== undefined && res.includedChunks < r.candidates.length
        // (Lone assistant turns before the first included user turn are never sent, so leaving them is no loss.)
        const historyLeft = c.history.slice(0, start).some((m) => m.role === 'user')
        return res.truncated === (chunksLeft || historyLeft)
      }),
      { numRuns: 300 },
    )
    // The cases must exercise the interesting paths, not just the trivial ones.
    t.ok(
      packed > 150 && cut > 50 && withHistory > 50 && withChunks > 20,
      `${model}: ${packed} of 300 packed (${cut} truncated, ${withHistory} with history, ` +
        `${withChunks} with chunks), all exact`,
    )
  }
})

t.test('context_length_exceeded when the request and reserve alone do not fit', async (t) => {
  const requestOther: ChatMessage[] = [{ role: 'user', content: 'x '.repeat(200) }]
  const need = counter.chatTokens(requestOther, MODEL)
  const fits = pack(input({ window: need + 100, reserve: 100, requestOther, history: conversation(4) }))
  t.equal(fits.totalTokens, need, 'exactly at the limit: sent, with no room for history')
  t.equal(fits.includedHistory, 0)
  t.equal(fits.truncated, true)
  t.throws(() => pack(input({ window: need + 99, reserve: 100, requestOther })), {
    name: 'GatewayError',
    status: 400,
    code: 'context_length_exceeded',
    param: 'messages',
    message: new RegExp(`allows ${need + 99} tokens.*take ${need} and 100 are reserved`),
  })
})

t.test('truncation keeps the newest whole messages, oldest first', async (t) => {
  const history = conversation(100)
  const all = pack(input({ history }))
  t.equal(all.includedHistory, 100)
  t.equal(all.truncated, false)

  const unit = counter.storedMessageTokens(history[0] as StoredMessage, MODEL) // every turn here has ~the same size
  const base = pack(input({})).totalTokens
  const res = pack(input({ window: base + 1000 + unit * 10 + 5, history }))
  t.ok(res.includedHistory >= 8 && res.includedHistory <= 10, `${res.includedHistory} messages`)
  t.equal(res.includedHistory % 2, 0, 'whole pairs')
  t.same(
    res.messages.slice(0, -1).map((m) => m.content),
    history.slice(100 - res.includedHistory).map((m) => m.text),
  )
  t.equal(res.truncated, true)
})

t.test('a user/assistant pair is never split', async (t) => {
  const history = [
    stored(0, 'user', 'first question'),
    stored(1, 'assistant', 'first answer'),
    stored(2, 'user', 'a much longer second question with many more words in it'),
    stored(3, 'assistant', 'second answer'),
  ]
  const cost = (m: StoredMessage): number => counter.storedMessageTokens(m, MODEL)
  const [u0, a0, u1, a1] = history as [StoredMessage, StoredMessage, StoredMessage, StoredMessage]
  const base = pack(input({ reserve: 0 })).totalTokens
  // Room for the newest pair and the older answer, not its question: the older pair goes whole.
  const res = pack(input({ reserve: 0, window: base + cost(u1) + cost(a1) + cost(a0) + cost(u0) - 1, history }))
  t.same(
    res.messages.map((m) => m.content),
    [u1.text, a1.text, 'What did we talk about?'],
  )
  t.equal(res.truncated, true)

  // maxHistoryMessages counts messages but still takes whole pairs.
  t.equal(pack(input({ history, maxHistoryMessages: 3 })).includedHistory, 2)
  t.equal(pack(input({ history, maxHistoryMessages: 1 })).includedHistory, 0)
  t.equal(pack(input({ history, maxHistoryMessages: 0 })).includedHistory, 0)
  // Consecutive user turns (a request that carried two) are separate units.
  const twoUsers = [stored(0, 'user', 'a'), stored(1, 'user', 'b'), stored(2, 'assistant', 'c')]
  t.equal(pack(input({ history: twoUsers, maxHistoryMessages: 2 })).includedHistory, 2)
})

t.test('a history that starts with an assistant turn', async (t) => {
  const greeting = [
    stored(0, 'assistant', 'Hi! How can I help?'),
    stored(1, 'user', 'hello'),
    stored(2, 'assistant', 'hey'),
  ]
  const res = pack(input({ history: greeting }))
  t.same(
    res.messages.map((m) => m.content),
    ['hello', 'hey', 'What did we talk about?'],
    'the orphaned opening reply is not sent first',
  )
  t.equal(res.truncated, false, 'nothing was left out for the budget')
  t.equal(res.totalTokens, encodeChat(res.messages as Chat, 'gpt-4o').length)
  t.equal(pack(input({ history: [stored(5, 'assistant', 'alone')] })).includedHistory, 0)
  const twoReplies = [stored(0, 'assistant', 'one'), stored(1, 'assistant', 'two'), stored(2, 'user', 'q')]
  t.same(pack(input({ history: twoReplies })).messages.map((m) => m.content), ['q', 'What did we talk about?'])
})

t.test('chunks: best first, within their budget and the remaining room', async (t) => {
  const texts = ['alpha '.repeat(50), 'beta '.repeat(300), 'gamma '.repeat(40), 'delta '.repeat(40)]
  const r = retrieval(texts, 150)
  const res = pack(input({ retrieval: r, history: conversation(10) }))
  t.same(res.selectedChunks, [0, 2], 'the oversized second chunk is skipped, the next ones still fit')
  t.equal(res.includedChunks, 2)
  const msg = res.messages.at(-2) as ChatMessage
  t.match(msg.content, /file-0\.md[\s\S]*file-2\.md/)
  t.ok(counter.messageTokens(msg, MODEL) <= 150)
  t.equal(res.truncated, true, 'chunks were left out')
  t.equal(res.includedHistory, 10)
  t.equal(res.totalTokens, encodeChat(res.messages as Chat, 'gpt-4o').length)

  // The rendered framing is what the budget is checked against, not the content sum.
  const ten = 'one two three four five six seven eight nine ten'
  const tight = retrieval([ten], counter.textTokens(ten) + 2)
  t.equal(pack(input({ retrieval: tight })).includedChunks, 0, 'its content fits, its rendered message does not')

  // Chunks come before history, and never take room the request needs.
  const base = pack(input({})).totalTokens
  const small = pack(input({ window: base + 1000 + 120, retrieval: retrieval(texts, 1000), history: conversation(10) }))
  t.ok(small.totalTokens + 1000 <= base + 1000 + 120)
  t.equal(small.includedChunks, 1)
  t.ok(small.includedHistory < 10)

  const none = retrieval([], 500)
  const res2 = pack(input({ retrieval: none }))
  t.equal(res2.includedChunks, 0)
  t.equal(res2.messages.length, 1)
  t.same(none.calls, [], 'render is never called with nothing selected')
  t.equal(pack(input({ retrieval: retrieval(texts, 0) })).includedChunks, 0)
})

t.test('recall seam: only when history does not fit, between history and the retrieval message, counted exactly', async (t) => {
  const history = conversation(60, 'message with a few words')
  const base = pack(input({ reserve: 0 })).totalTokens
  const window = base + 400
  const seen: Array<{ room: number; recent: number; oldest: number | undefined }> = []
  const recall = {
    recentShare: 0.5,
    select: (ctx: { room: number; recent: ReadonlySet<number>; oldestRecentSeq: number | undefined }) => {
      seen.push({ room: ctx.room, recent: ctx.recent.size, oldest: ctx.oldestRecentSeq })
      const content = 'Earlier in this conversation:\n[user] turn 2'
      return { message: { role: 'system' as const, content }, messages: 1 }
    },
  }
  const res = pack(input({ reserve: 0, window, history, recall, retrieval: retrieval(['some chunk text'], 50) }))
  t.equal(seen.length, 1)
  t.equal(res.recalledMessages, 1)
  t.match(res.messages.at(-3)?.content, /^Earlier in this conversation/, 'right before the retrieval message')
  t.match(res.messages.at(-2)?.content, /^Relevant excerpts/)
  t.match(res.messages.at(-4)?.content, /^message with a few words/, 'after the history')
  t.equal(res.totalTokens, encodeChat(res.messages as Chat, 'gpt-4o').length)
  t.ok(res.totalTokens <= window)
  const first = seen[0]
  t.equal(first?.recent, res.includedHistory)
  t.equal(first?.oldest, 60 - res.includedHistory)
  t.equal(res.truncated, true)

  // Fits whole: recall is not consulted.
  seen.length = 0
  pack(input({ history: conversation(6), recall }))
  t.equal(seen.length, 0)

  // A recall block larger than its room is dropped, and the newest turns get the whole room back.
  const huge: ChatMessage = { role: 'system', content: 'x '.repeat(5000) }
  const greedy = { recentShare: 0.5, select: () => ({ message: huge, messages: 3 }) }
  const without = pack(input({ reserve: 0, window, history }))
  const dropped = pack(input({ reserve: 0, window, history, recall: greedy }))
  t.equal(dropped.recalledMessages, 0)
  t.same(dropped.messages, without.messages)
})

t.test('a recall block sent again stays where it was first sent: turns saved since come after it', async (t) => {
  const history = conversation(60, 'message with a few words')
  const window = pack(input({ reserve: 0 })).totalTokens + 400
  const block: ChatMessage = { role: 'user', content: 'Earlier turns of this conversation:\nuser: turn 2' }
  const recall = (before: number | undefined) => ({ recentShare: 0.5, select: () => ({ message: block, messages: 1, ...(before === undefined ? {} : { before }) }) })
  const plain = pack(input({ reserve: 0, window, history, recall: recall(undefined) }))
  t.same(plain.messages.at(-2), block, 'no position: right after the history')
  const first = history.length - plain.includedHistory

  // Placed before a kept user turn: everything after it is the turns saved since, then the request.
  const at = first + 4
  const inside = pack(input({ reserve: 0, window, history, recall: recall(at) }))
  const i = inside.messages.indexOf(block)
  t.equal(i, at - first, 'before the turn with that seq')
  t.same(inside.messages.slice(i + 1, -1), history.slice(at).map((h) => h.message))
  t.equal(inside.totalTokens, encodeChat(inside.messages as Chat, 'gpt-4o').length, 'counted exactly wherever it is')
  t.equal(inside.stableMessages, inside.messages.length - 1, 'the block is part of the stable prefix there')

  // An assistant turn never follows the block's position: the next user turn is taken.
  const odd = pack(input({ reserve: 0, window, history, recall: recall(at + 1) }))
  t.equal(odd.messages.indexOf(block), at + 2 - first)
  // Before the kept window, or past the history: at its two ends, never dropped.
  t.equal(pack(input({ reserve: 0, window, history, recall: recall(0) })).messages.indexOf(block), 0)
  t.same(pack(input({ reserve: 0, window, history, recall: recall(history.length) })).messages.at(-2), block)

  // Never between a tool call and its results: the block goes before the next user turn after the unit.
  const tools: StoredMessage[] = [
    ...conversation(40, 'message with a few words'),
    storedMessage(40, { role: 'user', content: 'look it up' }, 3, 0),
    storedMessage(41, { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] }, 8, 0),
    storedMessage(42, { role: 'tool', tool_call_id: 'c1', content: 'found' }, 2, 0),
    storedMessage(43, { role: 'assistant', content: 'it is found' }, 4, 0),
    storedMessage(44, { role: 'user', content: 'thanks' }, 2, 0),
    storedMessage(45, { role: 'assistant', content: 'welcome' }, 2, 0),
  ]
  const around = pack(input({ reserve: 0, window, history: tools, recall: recall(41) }))
  const j = around.messages.indexOf(block)
  t.same(around.messages[j + 1], { role: 'user', content: 'thanks' })
})

/** A stored history of random units: plain turns, answered tool units, and units that cannot be sent as they are. */
const unitHistoryArb = fc
  .array(
    fc.oneof(
      fc.constant<'turn'>('turn'),
      fc.integer({ min: 1, max: 3 }).map((calls) => ({ calls, answered: calls })),
      fc.integer({ min: 1, max: 3 }).chain((calls) => fc.integer({ min: 0, max: calls - 1 }).map((answered) => ({ calls, answered }))),
      fc.constant<'orphan'>('orphan'),
    ),
    { maxLength: 25 },
  )
  .map((units) => {
    const out: StoredMessage[] = []
    const add = (m: ChatMessage): void => void out.push(storedMessage(out.length, m, counter.storedContentTokens(m), 0))
    units.forEach((u, n) => {
      if (u === 'turn') {
        add({ role: 'user', content: `question ${n}` })
        add({ role: 'assistant', content: `answer ${n}` })
      } else if (u === 'orphan') {
        add({ role: 'tool', tool_call_id: `gone_${n}`, content: 'a result whose call was pruned' })
      } else {
        add({ role: 'user', content: `do task ${n}` })
        const ids = Array.from({ length: u.calls }, (_, i) => `call_${n}_${i}`)
        add({ role: 'assistant', content: null, tool_calls: ids.map((id) => ({ id, type: 'function', function: { name: 'f', arguments: `{"n":${n}}` } })) })
        for (const id of ids.slice(0, u.answered)) add({ role: 'tool', tool_call_id: id, content: `result ${id}` })
        if (u.answered === u.calls) add({ role: 'assistant', content: `done ${n}` })
      }
    })
    return out
  })

t.test('tool units: never split, never an unanswered call or an orphaned result, history opens with a user turn (random)', async (t) => {
  fc.assert(
    fc.property(unitHistoryArb, fc.integer({ min: 60, max: 1500 }), fc.integer({ min: 0, max: 40 }), fc.constantFrom(1, 4, 32), (history, window, limit, historyStep) => {
      const requestOther: ChatMessage[] = [{ role: 'user', content: 'and now?' }]
      let res
      try {
        res = pack(input({ window, reserve: 0, history, requestOther, maxHistoryMessages: limit, historyStep }))
      } catch {
        return counter.chatTokens(requestOther, MODEL) > window
      }
      const ms = res.messages
      // The mock provider's own implementation of OpenAI's rule, independent of the gateway's.
      if (pairingError(ms as unknown[]) !== undefined) return false
      if (res.totalTokens > window || res.includedHistory > limit) return false
      if (res.includedHistory > 0 && ms[0]?.role !== 'user') return false
      // Kept history is in stored order.
      const kept = ms.slice(0, res.includedHistory)
      const seqs = kept.map((m) => history.findIndex((s) => s.message === m))
      return seqs.every((s, i) => s >= 0 && (i === 0 || s > (seqs[i - 1] as number)))
    }),
    { seed: FC_SEED_OVERRIDE ?? 13, numRuns: 400 },
  )
  t.pass('holds for 400 random histories')
})

t.test('history start moves in steps: consecutive turns share the kept window until it jumps to the next boundary', async (t) => {
  const step = 8
  const starts: number[] = []
  let prev: number | undefined
  let jumps = 0
  for (let n = 40; n <= 120; n += 2) {
    const history = conversation(n, 'a turn of a fairly long conversation')
    const base = pack(input({ reserve: 0 })).totalTokens
    const res = pack(input({ reserve: 0, window: base + 400, history, historyStep: step }))
    const first = res.messages[0] as ChatMessage
    const start = history.findIndex((h) => h.message === first)
    t.ok(start >= 0)
    starts.push(start)
    if (prev !== undefined && start !== prev) {
      jumps++
      t.equal(start % step, 0, `a jump lands on a boundary (${start})`)
    }
    prev = start
    // Packed from the stored session alone: the same input packs the same window.
    t.same(pack(input({ reserve: 0, window: base + 400, history, historyStep: step })).messages, res.messages)
  }
  t.ok(jumps <= Math.ceil(80 / step) + 1, `${jumps} jumps over 40 turns`)
  const unstepped = new Set(
    Array.from({ length: 41 }, (_, i) => {
      const history = conversation(40 + 2 * i, 'a turn of a fairly long conversation')
      const base = pack(input({ reserve: 0 })).totalTokens
      const res = pack(input({ reserve: 0, window: base + 400, history }))
      return history.findIndex((h) => h.message === res.messages[0])
    }),
  )
  t.ok(unstepped.size > jumps * 2, `without steps the start moves every turn (${unstepped.size} starts)`)
})
