/**
 * Only relevant chunks reach the prompt: chit-chat and questions no file answers retrieve nothing and `_metadata.rag`
 * says why; an empty `ragQuery` searches for nothing; a question a file answers still gets its chunk.
 */
import t, { type Test } from 'tap'
import { KEY_A, startHarness, type Harness } from './helpers/harness.js'

interface Rag { enabled: boolean; resultsFound: number; query: string | null; sources: Array<{ filename: string }>; reason: string | null; bestRelevance: number | null }

const FILES: Array<[string, string]> = [
  ['garden.md', '# Garden\n\nThe tomato beds are watered at six every morning. Basil grows beside the greenhouse door.'],
  ['boiler.md', '# Boiler\n\nThe boiler pressure should stay between 1.2 and 1.5 bar. Bleed the radiators every autumn.'],
  ['library.md', '# Library\n\nThe reading room closes at nine on weekdays. Overdue books cost ten cents a day, and greetings cards are sold at the desk.'],
]

async function setup(t: Test): Promise<Harness> {
  const h = await startHarness(t)
  for (const [filename, content] of FILES) {
    const r = await h.fetch('/api/v1/files', { method: 'POST', key: KEY_A, provider: null, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ filename, content }) })
    t.equal(r.status, 201)
  }
  return h
}

async function ask(h: Harness, content: string, extra: object = {}): Promise<{ rag: Rag; includedChunks: number; sent: string }> {
  const res = await h.client().chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content }], ...extra })
  const meta = (res as unknown as { _metadata: { rag: Rag; context: { includedChunks: number } } })._metadata
  return { rag: meta.rag, includedChunks: meta.context.includedChunks, sent: JSON.stringify(h.mock.lastChatBody()?.messages) }
}

t.test('chit-chat and unanswerable questions add no chunks, and say why', async (t) => {
  const h = await setup(t)
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

t.test('a question a file answers still gets its chunk', async (t) => {
  const h = await setup(t)
  const r = await ask(h, 'What pressure should the boiler stay at?')
  t.equal(r.rag.reason, null)
  t.equal(r.rag.sources[0]?.filename, 'boiler.md')
  t.match(r.sent, /1\.2 and 1\.5 bar/)
  t.ok((r.rag.bestRelevance ?? 0) >= 0.5)
})

t.test('ragQuery "" searches for nothing; useRAG false and no files say so', async (t) => {
  const h = await setup(t)
  for (const q of ['', '   ']) {
    const r = await ask(h, 'What pressure should the boiler stay at?', { ragQuery: q })
    t.equal(r.includedChunks, 0)
    t.notMatch(r.sent, /bar/)
    t.match(r.rag, { enabled: true, resultsFound: 0, query: q, reason: 'empty_query', bestRelevance: null })
  }
  t.match((await ask(h, 'What pressure should the boiler stay at?', { useRAG: false })).rag, { enabled: false, reason: 'disabled' })
  const fresh = await startHarness(t)
  const none = await ask(fresh, 'What pressure should the boiler stay at?')
  t.match(none.rag, { resultsFound: 0, reason: 'no_files' })
})
