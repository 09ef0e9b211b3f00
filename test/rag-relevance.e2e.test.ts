/**
 * Only relevant chunks reach the prompt: chit-chat and questions no file answers retrieve nothing and `_metadata.rag`
 * says why; an empty `ragQuery` searches for nothing; a question a file answers still gets its chunk. On every store
 * engine (LMDB, and PostgreSQL when the test cluster is there): the files and their chunks are the store's.
 */
import { encodeChat } from 'gpt-tokenizer'
import t, { type Test } from 'tap'
import { KEY_A, startHarness, type Harness } from './helpers/harness.js'
import { testableEngines, type StoreEngine } from './helpers/store-engines.js'
import { uploadJson } from './helpers/uploads.js'

interface Rag { enabled: boolean; resultsFound: number; query: string | null; sources: Array<{ filename: string }>; reason: string | null; bestRelevance: number | null }

const FILES: Array<[string, string]> = [
  ['garden.md', '# Garden\n\nThe tomato beds are watered at six every morning. Basil grows beside the greenhouse door.'],
  ['boiler.md', '# Boiler\n\nThe boiler pressure should stay between 1.2 and 1.5 bar. Bleed the radiators every autumn.'],
  ['library.md', '# Library\n\nThe reading room closes at nine on weekdays. Overdue books cost ten cents a day, and greetings cards are sold at the desk.'],
]

async function setup(t: Test, engine: StoreEngine): Promise<Harness> {
  const h = await startHarness(t, { engine })
  for (const [filename, content] of FILES) {
    const r = await uploadJson(h, { filename, content }, { provider: null })
    t.equal(r.status, 201)
  }
  return h
}

interface Asked {
  rag: Rag
  includedChunks: number
  sent: string
  /** `_metadata.context.totalTokens` and the exact count of the messages the upstream received. */
  tokens: { reported: number; sent: number }
}

async function ask(h: Harness, content: string, extra: object = {}): Promise<Asked> {
  const res = await h.client().chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content }], ...extra })
  const meta = (res as unknown as { _metadata: { rag: Rag; context: { includedChunks: number; totalTokens: number } } })._metadata
  const messages = h.mock.lastChatBody()?.messages as Parameters<typeof encodeChat>[0]
  return {
    rag: meta.rag,
    includedChunks: meta.context.includedChunks,
    sent: JSON.stringify(messages),
    tokens: { reported: meta.context.totalTokens, sent: encodeChat(messages, 'gpt-4o').length },
  }
}

// Every case runs on both engines (22 s here, on a 2-core machine under load): tap's 120 s would leave too little room
// on CI's loaded machine, as files.e2e found.
t.setTimeout(240_000)

for (const engine of testableEngines(t, 'retrieval relevance')) {
  t.test(`${engine.name}: chit-chat and unanswerable questions add no chunks, and say why`, async (t) => {
    const h = await setup(t, engine)
    for (const q of ['Who won the football world cup in 1998?', 'Is the museum open on Mondays?']) {
      const r = await ask(h, q)
      t.equal(r.includedChunks, 0, `${q}: no chunk`)
      t.notMatch(r.sent, /Excerpts from the user's files/, `${q}: no context message`)
      t.ok(r.rag.reason === 'no_match' || r.rag.reason === 'not_relevant', `${q}: reason ${r.rag.reason}`)
    }
    // Turns that ask nothing are not searched at all, even when a file shares their words ("greetings cards").
    for (const q of ['hi', 'thanks!', 'ok, got it', 'Greetings!', '👍']) {
      const r = await ask(h, q)
      t.match(r.rag, { reason: 'small_talk', resultsFound: 0, sources: [], bestRelevance: null }, `${q}: small talk`)
    }
    // A caller's own ragQuery is always searched.
    const chosen = await ask(h, 'thanks!', { ragQuery: 'boiler pressure' })
    t.equal(chosen.rag.sources[0]?.filename, 'boiler.md')
    // "greetings" is in library.md, but one common word of a question about something else is not relevance.
    const weak = await ask(h, 'Send my greetings to the new Portuguese ambassador in Helsinki')
    t.equal(weak.rag.reason, 'not_relevant')
    t.ok(weak.rag.resultsFound > 0 && (weak.rag.bestRelevance ?? 1) < 0.3, `found ${weak.rag.resultsFound}, best relevance ${weak.rag.bestRelevance}`)
  })

  t.test(`${engine.name}: a question a file answers still gets its chunk`, async (t) => {
    const h = await setup(t, engine)
    const r = await ask(h, 'What pressure should the boiler stay at?')
    t.equal(r.rag.reason, null)
    t.equal(r.rag.sources[0]?.filename, 'boiler.md')
    t.match(r.sent, /1\.2 and 1\.5 bar/)
    t.ok((r.rag.bestRelevance ?? 0) >= 0.5)
    t.equal(r.tokens.reported, r.tokens.sent, 'the prompt with its excerpts counted exactly')
  })

  t.test(`${engine.name}: a question with an image, audio or a file attached is searched for what the user typed alone`, async (t) => {
    const h = await setup(t, engine)
    const question = 'What pressure should the boiler stay at?'
    const plain = await ask(h, question)
    const meta = async (messages: unknown[]): Promise<Rag> => {
      const res = await h.client().chat.completions.create({ model: 'openai/gpt-4o', messages } as never)
      return (res as unknown as { _metadata: { rag: Rag } })._metadata.rag
    }
    const attached = [
      { type: 'text', text: question },
      { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
      { type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } },
      { type: 'file', file: { file_data: 'data:application/pdf;base64,AAAA', filename: 'scan.pdf' } },
    ]
    const withMedia = await meta([{ role: 'user', content: attached }])
    t.equal(withMedia.query, question, 'no [image]/[audio]/[file] markers in the query')
    t.equal(withMedia.bestRelevance, plain.rag.bestRelevance, 'the attachments do not dilute the relevance')
    t.equal(withMedia.sources[0]?.filename, 'boiler.md')
    // A turn that is only an image has no text: the question is the last user text, as in a tool loop.
    const imageOnly = await meta([
      { role: 'user', content: question },
      { role: 'assistant', content: 'Between 1.2 and 1.5 bar.' },
      { role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/gauge.png' } }] },
    ])
    t.equal(imageOnly.query, question)
  })

  t.test(`${engine.name}: ragQuery "" searches for nothing; useRAG false and no files say so`, async (t) => {
    const h = await setup(t, engine)
    for (const q of ['', '   ']) {
      const r = await ask(h, 'What pressure should the boiler stay at?', { ragQuery: q })
      t.equal(r.includedChunks, 0)
      t.notMatch(r.sent, /bar/)
      t.match(r.rag, { enabled: true, resultsFound: 0, query: q, reason: 'empty_query', bestRelevance: null })
    }
    t.match((await ask(h, 'What pressure should the boiler stay at?', { useRAG: false })).rag, { enabled: false, reason: 'disabled' })
    const fresh = await startHarness(t, { engine })
    const none = await ask(fresh, 'What pressure should the boiler stay at?')
    t.match(none.rag, { resultsFound: 0, reason: 'no_files' })
  })

  /** Seven small files, as a new user's first knowledge base (issue 24): each a few sentences about one thing. */
  const SMALL_KB: Array<[string, string]> = [
    ['gift-cards.md', '# Gift cards\n\nGift cards can be refunded within 30 days of purchase if no balance has been used. Refunds go back to the original payment method.'],
    ['shipping.md', '# Shipping\n\nOrders ship within two business days. Express delivery costs 12 euros and arrives the next day.'],
    ['returns.md', '# Returns\n\nItems can be returned within 60 days in their original packaging. Return labels are printed from your account page.'],
    ['warranty.md', '# Warranty\n\nElectronics carry a two-year warranty covering manufacturing defects. Accidental damage is not covered.'],
    ['accounts.md', '# Accounts\n\nPasswords must be at least twelve characters. Two-factor authentication can be enabled in the security settings.'],
    ['stores.md', '# Stores\n\nOur stores open at nine and close at eight, Monday to Saturday. Sunday hours vary by city.'],
    ['loyalty.md', '# Loyalty\n\nMembers earn one point per euro spent. Points expire after eighteen months without a purchase.'],
  ]

  t.test(`${engine.name}: a small knowledge base: a question about one file brings that file only; a search for nothing relevant finds nothing`, async (t) => {
    const h = await startHarness(t, { engine })
    for (const [filename, content] of SMALL_KB) {
      const r = await uploadJson(h, { filename, content }, { provider: null })
      t.equal(r.status, 201)
    }
    const r = await ask(h, 'Can I get a refund for a gift card?')
    t.same([...new Set(r.rag.sources.map((s) => s.filename))], ['gift-cards.md'], 'only the gift-card file')

    const search = async (body: object): Promise<Array<{ filename: string; score: number; relevance: number }>> => {
      const res = await h.fetch('/api/v1/files/search', { method: 'POST', key: KEY_A, provider: null, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
      t.equal(res.status, 200)
      return ((await res.json()) as { data: Array<{ filename: string; score: number; relevance: number }> }).data
    }
    t.same(await search({ query: 'xylophone' }), [], 'a word in no file: no hits')
    t.same(await search({ query: 'photosynthesis in desert plants' }), [], 'nothing relevant: no hits')
    const hits = await search({ query: 'gift card refund' })
    t.equal(hits[0]?.filename, 'gift-cards.md')
    t.ok(hits.every((x) => x.relevance > 0 && x.relevance <= 1), 'every hit carries its relevance, 0–1')
    t.ok((hits[0]?.relevance ?? 0) >= 0.5, `the best hit holds most of the query (${hits[0]?.relevance})`)
    // Asking for weaker matches is possible, never for chunks that share nothing with the query.
    const loose = await search({ query: 'gift card refund for my account', min_relevance: 0 })
    t.ok(loose.length >= hits.length)
    const bad = await h.fetch('/api/v1/files/search', { method: 'POST', key: KEY_A, provider: null, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: 'x', min_relevance: 2 }) })
    t.equal(bad.status, 400)
    t.match(await bad.json(), { error: { param: 'min_relevance' } })
  })

  t.test(`${engine.name}: a second excerpt goes in as its best sentences only, and _metadata says so`, async (t) => {
    const h = await startHarness(t, { engine })
    const para = (city: string): string =>
      [
        `The ${city} ferry terminal was rebuilt after the storm.`,
        `Its waiting hall holds three hundred passengers.`,
        `Tickets for the ${city} night ferry to the islands are sold at the harbour kiosk until midnight.`,
        `A café serves breakfast from six.`,
        `Cyclists board first and park on the lower deck.`,
        `The harbour master publishes tide tables every week.`,
        `Parking near the quay is free on Sundays.`,
        `Local buses stop outside the main entrance every ten minutes.`,
      ].join(' ')
    const content = `# Ferries\n\n${para('Oban')}\n\n## Northern routes\n\n${para('Ullapool')}`
    const up = await uploadJson(h, { filename: 'ferries.md', content }, { provider: null })
    t.equal(up.status, 201)
    const r = await ask(h, 'Where are night ferry tickets to the islands sold?')
    t.equal(r.rag.reason, null)
    const sources = r.rag.sources as Array<{ filename: string; relevance: number; focused?: true }>
    t.ok(sources.length >= 2, `both passages go in (${sources.length})`)
    t.ok(sources.every((s) => s.relevance > 0 && s.relevance <= 1), 'each source says how relevant it was')
    t.equal(sources[0]?.focused, undefined, 'the best chunk goes in whole')
    t.equal(sources[1]?.focused, true, 'the next one is cut to its best sentences')
    t.match(r.sent, /café serves breakfast/, 'the best chunk whole, with its sentences that do not answer')
    t.equal(r.sent.match(/night ferry to the islands/g)?.length, 2, 'the answering sentence of both passages')
    t.equal(r.sent.match(/Parking near the quay/g)?.length, 1, "the second passage's other sentences stay out")
    t.equal(r.tokens.reported, r.tokens.sent, 'the prompt with a whole and a focused excerpt counted exactly')
  })

  t.test(`${engine.name}: a file that repeats the question's phrasing is more relevant than one holding its words apart (RAG_PHRASE_WEIGHT)`, async (t) => {
    const h = await startHarness(t, { engine })
    const files: Array<[string, string]> = [
      ['timetable.md', 'The night train to Vienna leaves from platform four.'],
      ['diary.md', 'Vienna was cold. We took the train home, and slept through the night.'],
    ]
    for (const [filename, content] of files) {
      const r = await uploadJson(h, { filename, content }, { provider: null })
      t.equal(r.status, 201)
    }
    const res = await h.fetch('/api/v1/files/search', { method: 'POST', key: KEY_A, provider: null, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: 'night train Vienna' }) })
    const hits = ((await res.json()) as { data: Array<{ filename: string; relevance: number }> }).data
    const of = (name: string): number | undefined => hits.find((x) => x.filename === name)?.relevance
    t.equal(of('timetable.md'), 1, 'every word, and both pairs side by side')
    // Every word, no pair side by side: (1 + 0.5 × 0) / 1.5, rounded to 3 places by the route.
    t.equal(of('diary.md'), 0.667)
    const r = await ask(h, 'night train Vienna?')
    t.equal(r.rag.bestRelevance, 1)
    t.equal(r.rag.sources[0]?.filename, 'timetable.md')
  })
}
