/**
 * `npm run demo`: recallgate working end to end, offline, in a few seconds. It starts a mock OpenRouter and the
 * gateway on free ports (a temporary DATA_DIR, an inline service key), then talks to the gateway with the official
 * `openai` SDK: a turn saved to a session, a follow-up that recalls it, a file upload and a question answered from
 * it, and a streamed answer printed as it arrives. Each step prints the reply, `_metadata`, and what the gateway
 * actually sent upstream — the evidence that memory and retrieval happened. Exits 0 when every step showed it.
 *
 * The mock's replies are scripted (it is not a model); the prompts the gateway builds around them are real.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { pathToFileURL } from 'node:url'
import OpenAI from 'openai'
import { loadConfig } from '../src/config.js'
import { startGateway } from '../src/main.js'
import { startMockUpstream } from '../src/mock-upstream.js'

const SERVICE_KEY = 'rg_demo_service_key_0001-Vq8Zr3Lw5Ym2'
const MODEL = 'openai/gpt-4o-mini'
const SESSION = 'demo-session'

interface Metadata {
  memory: { sessionId: string | null; historyMessages: number }
  rag: { enabled: boolean; resultsFound: number; query: string | null; sources?: Array<{ filename: string; chunk_index: number }> }
  context: { totalTokens: number; includedMessages: number; includedChunks: number; truncated: boolean }
}

/** The gateway's extension fields ride in the request body; the SDK passes unknown fields through. */
type Extensions = { sessionId?: string; saveToMemory?: boolean; useRAG?: boolean; ragQuery?: string }

const GUIDE = `# Lisbon travel notes

## Getting around
Tram 28 climbs from Martim Moniz through Graça and Alfama to Estrela: take it early in the morning, before the
queues. A Viva Viagem card (0.50 EUR) loaded with Zapping credit works on trams, buses, the metro and the ferries.

## Food
Pastéis de Belém has baked custard tarts since 1837; order them warm with cinnamon. For fish, the Time Out Market
at Cais do Sodré is convenient but the tascas of Alfama are cheaper.

## Day trips
Sintra is 40 minutes by train from Rossio station. Buy the return ticket at the machines, not on the train.
`

export async function runDemo(out: NodeJS.WritableStream = process.stdout): Promise<void> {
  const say = (s = ''): void => void out.write(`${s}\n`)
  const failures: string[] = []
  const check = (ok: boolean, what: string): void => {
    if (!ok) failures.push(what)
  }
  const dataDir = mkdtempSync(join(tmpdir(), 'recallgate-demo-'))
  const mock = await startMockUpstream({ maxRecorded: 10 })
  const silent = new Writable({ write: (_c, _e, done) => done() })
  const gw = await startGateway(
    loadConfig({ PORT: '0', UPSTREAM_BASE_URL: mock.url, DATA_DIR: dataDir, SERVICE_KEYS: `${SERVICE_KEY}:pro`, LOG_LEVEL: 'warn' }),
    { logDestination: silent, onBootstrapKey: () => undefined },
  )
  const client = new OpenAI({ baseURL: `${gw.url}/api/v1`, apiKey: 'sk-or-demo-provider-key', defaultHeaders: { serviceKey: SERVICE_KEY }, maxRetries: 0 })
  const chat = async (content: string, ext: Extensions, reply: string) => {
    mock.enqueue({ reply })
    const res = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content }], ...(ext as object) })
    return { text: res.choices[0]?.message.content ?? '', meta: (res as unknown as { _metadata: Metadata })._metadata }
  }
  const upstreamMessages = (): Array<{ role: string; content: string }> =>
    (mock.lastChatBody()?.messages as Array<{ role: string; content: string }> | undefined) ?? []
  const showUpstream = (): void => {
    for (const m of upstreamMessages()) {
      // The retrieval message is the interesting one: show its excerpts, not just its preamble.
      const lines = m.content.startsWith('Excerpts from') ? m.content.split('\n').filter((l) => l.trim() !== '').slice(0, 8) : [m.content]
      say(`      ${m.role.padEnd(9)} ${oneLine(lines[0] ?? '', 100)}`)
      for (const l of lines.slice(1)) say(`      ${''.padEnd(9)} ${oneLine(l, 100)}`)
    }
  }

  try {
    say(`recallgate demo — mock provider at ${mock.url}, gateway at ${gw.url}`)
    say(`DATA_DIR ${dataDir}; service key ${SERVICE_KEY} (plan pro); model ${MODEL}. The mock's replies are scripted.`)

    say(`\n1. A first turn, saved to session "${SESSION}"`)
    const t1 = await chat('Hi! I am Ada, and I am planning three days in Lisbon in May.', { sessionId: SESSION }, 'Hello Ada! May is a lovely time for Lisbon. How can I help?')
    say(`   reply:     ${t1.text}`)
    say(`   _metadata: ${JSON.stringify(t1.meta)}`)

    say('\n2. A follow-up in the same session: the gateway puts the earlier turn back into the prompt')
    const t2 = await chat('What is my name, and where am I going?', { sessionId: SESSION }, 'You are Ada, and you are going to Lisbon.')
    say(`   reply:     ${t2.text}`)
    say(`   _metadata: ${JSON.stringify(t2.meta)}`)
    say('   sent upstream:')
    showUpstream()
    check(t2.meta.memory.historyMessages > 0, 'the follow-up carried no history')

    say('\n3. Upload a file to the knowledge base (POST /api/v1/files)')
    const up = await fetch(`${gw.url}/api/v1/files`, {
      method: 'POST',
      headers: { serviceKey: SERVICE_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ filename: 'lisbon-notes.md', content: GUIDE, metadata: { trip: 'lisbon' } }),
    })
    const file = (await up.json()) as { id: string; filename: string; bytes: number; chunks: number; status: string }
    say(`   ${up.status} ${JSON.stringify({ id: file.id, filename: file.filename, bytes: file.bytes, chunks: file.chunks, status: file.status })}`)
    check(up.status === 201, `upload answered ${up.status}`)

    say('\n4. A question the file answers: retrieval adds the best excerpts as a user message right before the question')
    const t3 = await chat('Which tram goes up to Alfama, and when should I take it?', {}, 'Tram 28 — take it early in the morning, before the queues.')
    say(`   reply:     ${t3.text}`)
    say(`   _metadata: ${JSON.stringify(t3.meta)}`)
    say('   sent upstream:')
    showUpstream()
    check(t3.meta.rag.resultsFound > 0, 'retrieval found nothing in the uploaded file')

    say('\n5. A streamed answer, printed as it arrives (memory and retrieval on)')
    mock.enqueue({ reply: 'Sintra is 40 minutes by train from Rossio — buy the return ticket at the machines, and take tram 28 the next morning.', chunkChars: 4, interChunkDelayMs: 25 })
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Any day trip you would suggest, by train?' }],
      stream: true,
      ...({ sessionId: SESSION } satisfies Extensions as object),
    })
    let streamMeta: Metadata | undefined
    let streamed = ''
    out.write('   reply:     ')
    for await (const chunk of stream) {
      streamMeta ??= (chunk as unknown as { _metadata?: Metadata })._metadata
      const piece = chunk.choices[0]?.delta?.content ?? ''
      streamed += piece
      out.write(piece)
    }
    say()
    say(`   _metadata (first chunk): ${JSON.stringify(streamMeta)}`)
    check(streamed.length > 0 && streamMeta !== undefined, 'the stream carried no text or no _metadata')

    const session = (await (await fetch(`${gw.url}/api/v1/sessions/${SESSION}`, { headers: { serviceKey: SERVICE_KEY } })).json()) as { messages: unknown[] }
    say(`\n6. GET /api/v1/sessions/${SESSION}: ${session.messages.length} messages saved (3 exchanges in the session)`)
    check(session.messages.length === 6, `the session holds ${session.messages.length} messages, expected 6`)
  } finally {
    await gw.close()
    await mock.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
  if (failures.length > 0) throw new Error(`demo: ${failures.join('; ')}`)
  say('\nDone: everything shut down and the temporary DATA_DIR removed.')
}

function oneLine(s: string, max: number): string {
  const flat = s.replace(/\s+/g, ' ').trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

const entry = process.argv[1]
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) {
  runDemo().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`)
      process.exit(1)
    },
  )
}
