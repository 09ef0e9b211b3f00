/**
 * Long-term recall end to end: a fact planted early in a session too long for the window comes back (inside the recall
 * block, after the retrieved-file context) for a question about it and not for an unrelated one; the prompt still fits
 * the window exactly; streaming and saveToMemory:false; other tenants and deleted sessions never see it; RECALL=off.
 */
import t, { type Test } from 'tap'
import { encodeChat } from 'gpt-tokenizer'
import { KEY_A, KEY_B, startHarness, type Harness } from './helpers/harness.js'
import { uploadJson } from './helpers/uploads.js'
import { testableEngines } from './helpers/store-engines.js'

const MODEL = 'openai/gpt-4o'
const WINDOW = 1200

interface Meta {
  memory: { sessionId: string | null; historyMessages: number; recalledMessages: number }
  context: { totalTokens: number; truncated: boolean; window: number; reserved: number }
}
type Sent = Array<{ role: 'system' | 'user' | 'assistant'; content: string }>

const FACT = "My grandmother's cat is called Bartholomew and he only eats sardines."
const QUESTION = "What is my grandmother's cat called?"
const UNRELATED = 'Any tips for baking sourdough bread?'
const WORDS = ['weather', 'train', 'coffee', 'garden', 'meeting', 'report', 'bicycle', 'holiday', 'printer', 'lunch']
const filler = (i: number): string => `Quick note ${i} about the ${WORDS[i % 10]}, the ${WORDS[(i + 3) % 10]} and the ${WORDS[(i + 7) % 10]} today.`

async function chat(h: Harness, sessionId: string, content: string, extra: Record<string, unknown> = {}, key = KEY_A) {
  const res = await h.fetch('/api/v1/chat/completions', {
    key,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content }], sessionId, useRAG: false, ...extra }),
  })
  const body = (await res.json()) as { _metadata: Meta }
  if (res.status !== 200) throw new Error(`${res.status} ${JSON.stringify(body)}`)
  return body._metadata
}

/** 34 exchanges (~1,700 tokens): the planted one fourth, then filler; far more than the 1,200-token window. */
async function longSession(h: Harness, sessionId: string, key = KEY_A, plant = true): Promise<void> {
  for (let i = 0; i < 34; i++) {
    if (i === 3 && plant) {
      h.mock.enqueue({ reply: 'What a distinguished name for a cat!' })
      await chat(h, sessionId, FACT, {}, key)
    } else await chat(h, sessionId, filler(i), {}, key)
  }
}

const sent = (h: Harness): Sent => (h.mock.lastChatBody()?.messages ?? []) as Sent
const mentions = (messages: Sent, text: string): boolean => messages.some((m) => m.content.includes(text))

function fitsExactly(t: Test, h: Harness, meta: Meta): void {
  const messages = sent(h)
  t.equal(meta.context.totalTokens, encodeChat(messages, 'gpt-4o').length, 'totalTokens is the exact count of what went upstream')
  t.ok(meta.context.totalTokens + meta.context.reserved <= WINDOW, 'prompt + reply reserve fit the window')
}

for (const engine of testableEngines(t, 'long-term recall')) {
  const harness = async (t: Test, env: Record<string, string> = {}): Promise<Harness> =>
    startHarness(t, { engine, env, mock: { models: [{ id: MODEL, context_length: WINDOW }] } })

  t.test(`${engine.name}: a planted fact comes back for a question about it, not for an unrelated one; the prompt fits exactly`, async (t) => {
    const h = await harness(t)
    await longSession(h, 'long')

    const meta = await chat(h, 'long', QUESTION, { saveToMemory: false })
    const messages = sent(h)
    t.ok(meta.memory.recalledMessages >= 2, 'the fact and its neighbour came back')
    t.ok(meta.memory.historyMessages > 0, 'the newest turns are still there')
    t.equal(meta.context.truncated, true, 'older turns were still left out')
    const block = messages.at(-2)
    t.equal(block?.role, 'user', 'right before the question, after the history, as a user message (never hoisted)')
    t.match(block?.content, /^Earlier turns of this conversation/)
    t.match(block?.content, /\nuser: My grandmother's cat is called Bartholomew and he only eats sardines\.\nassistant: What a distinguished name for a cat!\n/)
    t.match(block?.content, /\n\d{4}-\d\d-\d\d \d\d:\d\d UTC\n/, 'dated')
    t.same(messages.at(-1), { role: 'user', content: QUESTION })
    t.equal(messages.filter((m) => m.content.includes('Bartholomew')).length, 1, 'only in the block, not repeated')
    fitsExactly(t, h, meta)

    const other = await chat(h, 'long', UNRELATED, { saveToMemory: false })
    t.notOk(mentions(sent(h), 'Bartholomew'), 'an unrelated question does not bring it back')
    t.equal(other.memory.recalledMessages, 0)
    t.equal(other.context.truncated, true)
    fitsExactly(t, h, other)

    const s = await h.fetch('/api/v1/sessions/long')
    const session = (await s.json()) as { messages: unknown[] }
    t.equal(session.messages.length, 68, 'saveToMemory:false saved nothing; recall only read')
  })

  t.test(`${engine.name}: RECALL_KEEP_TOP: a follow-up on the same fact gets the same block, so the prompt repeats the previous one`, async (t) => {
    const h = await harness(t, { RECALL_KEEP_TOP: '2' })
    await longSession(h, 'long')
    // Not saved: the window stays where it is (where a block sent again goes inside the history: test/packer.test.ts).
    await chat(h, 'long', QUESTION, { saveToMemory: false })
    const first = sent(h)
    t.match(first.at(-2)?.content, /^Earlier turns of this conversation[^]*Bartholomew/)
    const meta = await chat(h, 'long', 'Does Bartholomew still eat only sardines?', { saveToMemory: false })
    const second = sent(h)
    t.same(second.slice(0, -1), first.slice(0, -1), 'the same history and the same block, byte for byte')
    t.same(second.at(-1), { role: 'user', content: 'Does Bartholomew still eat only sardines?' })
    fitsExactly(t, h, meta)

    // Another topic: its best hits are not in the block, so a new one is chosen.
    await chat(h, 'long', `What did I say about the ${WORDS[1]} and the ${WORDS[4]}?`, { saveToMemory: false })
    const third = sent(h)
    t.notOk(mentions(third, 'sardines'), 'the old block is gone')
    t.same(third.slice(0, first.length - 2), first.slice(0, -2), 'the history before it is unchanged')
  })

  t.test(`${engine.name}: a turn that asks nothing recalls nothing, even the same words said long ago`, async (t) => {
    const h = await harness(t)
    for (let i = 0; i < 34; i++) await chat(h, 'thanks', i === 3 ? 'Thanks a lot, that helps!' : filler(i))
    const thanks = await chat(h, 'thanks', 'Thanks a lot, that helps!', { saveToMemory: false })
    t.equal(thanks.memory.recalledMessages, 0, 'the old thanks is not recalled (chat/small-talk.ts)')
    t.notOk(sent(h).some((m) => m.content.startsWith('Earlier turns of this conversation')), 'no recall block')
    t.ok(thanks.memory.historyMessages > 0, 'the newest turns still go in')
    // The same old turn is recallable by a question that asks something.
    const asked = await chat(h, 'thanks', 'Which note did I say thanks a lot for, that helps?', { saveToMemory: false })
    t.ok(asked.memory.recalledMessages > 0, 'a question with those words recalls it')
  })

  t.test(`${engine.name}: streaming: the same recall, and _metadata on the first chunk says so`, async (t) => {
    const h = await harness(t)
    await longSession(h, 'long')
    const res = await h.fetch('/api/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: QUESTION }], sessionId: 'long', useRAG: false, stream: true }),
    })
    const text = await res.text()
    const first = JSON.parse(text.split('\n').find((l) => l.startsWith('data: {'))?.slice(6) ?? '{}') as { _metadata?: Meta }
    const meta = first._metadata
    if (meta === undefined) return t.fail('no _metadata on the first chunk')
    t.ok(meta.memory.recalledMessages >= 2)
    t.ok(mentions(sent(h), 'Bartholomew'))
    fitsExactly(t, h, meta)
    t.match(text, /data: \[DONE\]\n\n$/)
  })

  t.test(`${engine.name}: recall never crosses tenants, and a deleted session never comes back`, async (t) => {
    const h = await harness(t)
    await longSession(h, 'shared', KEY_A)
    await longSession(h, 'shared', KEY_B, false)

    const b = await chat(h, 'shared', QUESTION, { saveToMemory: false }, KEY_B)
    t.notOk(mentions(sent(h), 'Bartholomew'), "tenant b's session of the same id knows nothing of a's fact")
    fitsExactly(t, h, b)
    await chat(h, 'shared', QUESTION, { saveToMemory: false }, KEY_A)
    t.ok(mentions(sent(h), 'Bartholomew'), 'tenant a still recalls it')

    const del = await h.fetch('/api/v1/sessions/shared', { method: 'DELETE' })
    t.equal(del.status, 200)
    await longSession(h, 'shared', KEY_A, false)
    const after = await chat(h, 'shared', QUESTION, { saveToMemory: false })
    t.notOk(mentions(sent(h), 'Bartholomew'), 'a deleted session’s turns never come back, even under the same id')
    t.equal(after.context.truncated, true)
  })

  t.test(`${engine.name}: the history, then the recall block, then the retrieved-file context; RECALL=off keeps only the newest turns`, async (t) => {
    const h = await harness(t)
    await longSession(h, 'long')
    const up = await uploadJson(h, { filename: 'cats.txt', content: 'Cats called Bartholomew are usually grandmother cats that eat sardines.' })
    t.equal(up.status, 201)
    const meta = await chat(h, 'long', QUESTION, { saveToMemory: false, useRAG: true })
    const messages = sent(h)
    t.match(messages.at(-2)?.content, /cats\.txt/, 'retrieved-file context right before the question')
    t.match(messages.at(-3)?.content, /^Earlier turns of this conversation[\s\S]*only eats sardines/, 'the recall block before it')
    t.equal(messages.at(-4)?.role, 'assistant', 'the history before both')
    fitsExactly(t, h, meta)

    await h.restart({ RECALL: 'off' })
    const off = await chat(h, 'long', QUESTION, { saveToMemory: false })
    t.equal(off.memory.recalledMessages, 0)
    t.notOk(mentions(sent(h), 'only eats sardines'))
    t.equal(off.context.truncated, true)
    fitsExactly(t, h, off)
  })
}
