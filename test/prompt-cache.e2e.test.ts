/**
 * Prompts that providers can cache: consecutive requests of a session share their prefix up to the per-request parts,
 * the provider's cached_tokens reaches the client and the metrics, and Anthropic models get cache breakpoints.
 * The mock provider emulates OpenAI's automatic prefix cache (cached_tokens in 128-token steps from 1,024). On every
 * store engine (LMDB, and PostgreSQL when the test cluster is there): the prefix is the stored session's.
 */
import t from 'tap'
import { KEY_A, startHarness, type Harness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'
import { uploadJson } from './helpers/uploads.js'

type Part = { type: string; text?: string; cache_control?: unknown }
type Sent = Array<{ role: string; content: string | Part[] | null }>
type Meta = { context: { stablePrefixTokens: number; totalTokens: number }; memory: { historyMessages: number } }
const sent = (h: Harness): Sent => (h.mock.lastChatBody()?.messages ?? []) as Sent
const text = (c: Sent[number]['content']): string => (typeof c === 'string' ? c : (c ?? []).map((p) => p.text ?? '').join(''))

async function chat(h: Harness, body: Record<string, unknown>) {
  const r = await h.client().chat.completions.create({ model: 'openai/gpt-4o', ...body } as never)
  return r as unknown as { usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } }; _metadata: Meta }
}

const SYSTEM = { role: 'system', content: 'You are the archivist of the Lighthouse Society.' }
const long = (i: number): string => `Entry ${i}: ${'the keeper logged the tide, the lamp oil and the passing ships. '.repeat(25)}`

for (const engine of testableEngines(t, 'prompt caching')) {
  t.test(`${engine.name}: consecutive requests share their prefix up to the per-request parts; cached_tokens reaches the client and /metrics`, async (t) => {
    const h = await startHarness(t, { engine })
    const up = await uploadJson(h, { filename: 'lamps.md', content: '# Lamps\n\nThe Lighthouse Society lamp burns whale oil in winter and colza oil in summer.' })
    t.equal(up.status, 201)
    for (let i = 0; i < 4; i++) await chat(h, { messages: [SYSTEM, { role: 'user', content: long(i) }], sessionId: 'log', useRAG: false })

    const a = await chat(h, { messages: [SYSTEM, { role: 'user', content: 'Which oil does the Lighthouse Society lamp burn in winter?' }], sessionId: 'log' })
    const first = sent(h)
    const b = await chat(h, { messages: [SYSTEM, { role: 'user', content: 'Which oil does the lamp burn in summer?' }], sessionId: 'log' })
    const second = sent(h)

    // Retrieved excerpts sit right before the question, after the history, as a user message (never hoisted).
    const excerpt = first.at(-2)
    t.equal(excerpt?.role, 'user')
    t.match(text(excerpt?.content ?? null), /whale oil/)
    const stable = first.slice(0, -2)
    t.equal(stable.length, 1 + 8, 'system + the 8 stored messages')
    t.same(second.slice(0, stable.length), stable, 'the second prompt starts with the first one up to its per-request parts')
    t.ok(b._metadata.context.stablePrefixTokens > 0)
    t.ok(b._metadata.context.stablePrefixTokens < b._metadata.context.totalTokens)
    t.equal(a._metadata.context.stablePrefixTokens > 0, true, 'the fourth exchange was a prefix of this one too')

    const cached = b.usage.prompt_tokens_details?.cached_tokens ?? 0
    t.ok(cached >= 1024, `the provider's cached_tokens reach the client untouched (${cached})`)
    t.equal(cached % 128, 0)
    const metrics = await (await h.fetch('/metrics')).text()
    const line = metrics.split('\n').find((l) => l.startsWith('recallgate_tokens_total{') && l.includes('type="prompt_cached"'))
    t.ok(line !== undefined && Number(line.split(' ').at(-1)) >= cached, `counted in /metrics: ${line}`)

    // A client outside a session reports no stable prefix.
    const none = await chat(h, { messages: [SYSTEM, { role: 'user', content: 'hi' }], useRAG: false })
    t.equal(none._metadata.context.stablePrefixTokens, 0)
  })

  t.test(`${engine.name}: Anthropic models get breakpoints at the end of the system prompt and of the history; others do not`, async (t) => {
    const h = await startHarness(t, { engine })
    const anthropic = 'anthropic/claude-3.5-sonnet'
    const ask = (model: string, content: string, extra: Record<string, unknown> = {}) =>
      chat(h, { model, messages: [SYSTEM, { role: 'user', content }], sessionId: `bp-${model}`, useRAG: false, ...extra })
    await ask(anthropic, 'First question')
    await ask(anthropic, 'Second question')
    const marked = sent(h)
    const marks = marked.map((m) => (Array.isArray(m.content) ? m.content.filter((p) => p.cache_control !== undefined).length : 0))
    t.same(marks, [1, 0, 1, 0], 'system, then the last history message; not the new question')
    t.same((marked[0]?.content as Part[])[0], { type: 'text', text: SYSTEM.content, cache_control: { type: 'ephemeral' } })
    t.same(marked[2]?.content, [{ type: 'text', text: 'Echo: First question', cache_control: { type: 'ephemeral' } }])
    t.equal(marked[1]?.content, 'First question', 'unmarked messages go as they were')
    t.equal(marked[3]?.content, 'Second question')

    await ask('openai/gpt-4o', 'First question')
    await ask('openai/gpt-4o', 'Second question')
    t.notOk(JSON.stringify(sent(h)).includes('cache_control'), 'OpenAI caches on its own: no marks')

    // A client that marks its own prompt is left alone.
    const own = [{ type: 'text', text: 'Mine.', cache_control: { type: 'ephemeral', ttl: '1h' } }]
    await chat(h, { model: anthropic, messages: [{ role: 'system', content: own }, { role: 'user', content: 'Third question' }], sessionId: `bp-${anthropic}`, useRAG: false })
    t.equal(JSON.stringify(sent(h)).split('cache_control').length - 1, 1, 'only the client\'s own mark')
    t.same((sent(h)[0]?.content as Part[])[0], own[0])

    await h.restart({ PROMPT_CACHE: 'off' })
    await ask(anthropic, 'Fourth question')
    t.notOk(JSON.stringify(sent(h)).includes('cache_control'), 'PROMPT_CACHE=off')
    t.ok(KEY_A)
  })
}
