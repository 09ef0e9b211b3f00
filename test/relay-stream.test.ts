/**
 * relayStream on a real socket, with an upstream body the test feeds by hand: what the client sees and when, what is
 * captured, and how the relay lets go of the upstream (src/chat/relay-stream.ts, src/upstream/chunk-reader.ts).
 */
import { once } from 'node:events'
import { createServer, request, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Readable } from 'node:stream'
import t, { type Test } from 'tap'
import { relayStream, SSE_HEADERS, type StreamOutcome } from '../src/chat/relay-stream.js'
import { ClientGone } from '../src/http/client-gone.js'
import type { ChatMessage } from '../src/types.js'

const chunk = (content: string, extra = ''): string =>
  `data: {"id":"gen-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}}}]${extra}}\n\n`
const USAGE = 'data: {"id":"gen-1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}\n\n'
const DONE = 'data: [DONE]\n\n'

interface Setup {
  upstream: Readable
  outcome: Promise<StreamOutcome>
  response: Promise<IncomingMessage>
  saved: string[]
  /** The whole assistant message each save was given. */
  replies: ChatMessage[]
  url: string
}

/** A server relaying `upstream` to one client request; the test pushes upstream bytes. */
async function relay(t: Test, o: { includeUsage?: boolean; highWaterMark?: number; saves?: boolean; needsReply?: boolean; prefix?: string } = {}): Promise<Setup> {
  const upstream = new Readable({ read() {}, highWaterMark: o.highWaterMark ?? 16 * 1024 })
  const saved: string[] = []
  const replies: ChatMessage[] = []
  let resolveOutcome: (v: StreamOutcome) => void = () => undefined
  const outcome = new Promise<StreamOutcome>((r) => (resolveOutcome = r))
  const server = createServer((req, res) => {
    const gone = new ClientGone()
    res.once('close', () => {
      if (!res.writableFinished) gone.abort()
    })
    // What undici does with a body whose request's signal fires.
    gone.once('abort', () => upstream.destroy(gone.reason as Error))
    res.writeHead(200, SSE_HEADERS)
    void relayStream({
      upstream,
      res,
      client: gone,
      metadataJson: '{"memory":null}',
      includeUsage: o.includeUsage ?? false,
      maxEventBytes: 1024 * 1024,
      ...(o.saves === undefined ? {} : { saves: o.saves }),
      ...(o.needsReply === undefined ? {} : { needsReply: o.needsReply }),
      ...(o.prefix === undefined ? {} : { prefix: o.prefix }),
      onComplete: async (reply) => {
        saved.push(reply.content as string)
        replies.push(reply)
      },
    }).then(resolveOutcome)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
  const response = new Promise<IncomingMessage>((resolve, reject) => {
    const req = request(url, { method: 'POST' }, resolve)
    req.on('error', reject)
    req.end()
  })
  return { upstream, outcome, response, saved, replies, url }
}

async function text(res: IncomingMessage): Promise<string> {
  let s = ''
  for await (const c of res) s += (c as Buffer).toString('utf8')
  return s
}

t.test('events pass through as they come; _metadata on the first; usage hidden; [DONE] after the save', async (t) => {
  const s = await relay(t)
  s.upstream.push(': OPENROUTER PROCESSING\n\n')
  s.upstream.push(chunk('Hel') + chunk('lo'))
  const res = await s.response
  t.equal(res.headers['content-type'], SSE_HEADERS['content-type'])
  s.upstream.push(USAGE + DONE)
  s.upstream.push(null)
  const body = await text(res)
  t.equal(
    body,
    ': OPENROUTER PROCESSING\n\n' + chunk('Hel', ',"_metadata":{"memory":null}') + chunk('lo') + DONE,
    'comment kept, metadata spliced into the first event, the usage-only chunk not forwarded',
  )
  t.same(await s.outcome, { kind: 'completed', text: 'Hello', usage: { prompt_tokens: 9, completion_tokens: 2 } })
  t.same(s.saved, ['Hello'])
})

t.test('with nothing to save, the events that came with [DONE] leave with it, whole and in order', async (t) => {
  const s = await relay(t, { saves: false })
  s.upstream.push(chunk('Hel'))
  const res = await s.response
  s.upstream.push(chunk('lo') + chunk(' there') + USAGE + DONE)
  s.upstream.push(null)
  t.equal(await text(res), chunk('Hel', ',"_metadata":{"memory":null}') + chunk('lo') + chunk(' there') + DONE)
  t.same(await s.outcome, { kind: 'completed', text: 'Hello there', usage: { prompt_tokens: 9, completion_tokens: 2 } })
})

t.test('with no reply needed, events after the first output go through uncaptured; usage and errors are still found', async (t) => {
  const TOOL = 'data: {"id":"gen-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}\n\n'
  const s = await relay(t, { saves: false, needsReply: false })
  s.upstream.push(': OPENROUTER PROCESSING\n\n' + chunk('Hel'))
  const res = await s.response
  s.upstream.push(chunk('lo') + TOOL + chunk('', ',"finish_reason":"stop"') + USAGE + DONE)
  s.upstream.push(null)
  t.equal(await text(res), ': OPENROUTER PROCESSING\n\n' + chunk('Hel', ',"_metadata":{"memory":null}') + chunk('lo') + TOOL + chunk('', ',"finish_reason":"stop"') + DONE)
  t.same(await s.outcome, { kind: 'completed', text: 'Hel', usage: { prompt_tokens: 9, completion_tokens: 2 } }, 'the usage chunk captured, not relayed')

  const failing = await relay(t, { saves: false, needsReply: false })
  const ERROR = 'data: {"id":"gen-1","error":{"code":502,"message":"Provider disconnected"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}\n\n'
  failing.upstream.push(chunk('a') + chunk('b') + ERROR)
  const body = await text(await failing.response)
  t.ok(body.endsWith(ERROR), 'the error event relayed as it came, and the stream ends without [DONE]')
  t.match(await failing.outcome, { kind: 'failed', error: undefined })
})

t.test('the usage chunk is forwarded when the client asked for it', async (t) => {
  const s = await relay(t, { includeUsage: true })
  s.upstream.push(chunk('a') + USAGE + DONE)
  s.upstream.push(null)
  t.match(await text(await s.response), USAGE + DONE)
})

t.test('with n > 1, every choice is relayed and only choice 0 is captured for memory', async (t) => {
  // OpenAI streams each choice in its own events, told apart by `index`; the session keeps choice 0, as a JSON reply's.
  const other = (content: string): string =>
    `data: {"id":"gen-1","object":"chat.completion.chunk","choices":[{"index":1,"delta":{"content":${JSON.stringify(content)}}}]}\n\n`
  const s = await relay(t)
  s.upstream.push(other('Other ') + chunk('Hel') + other('reply') + chunk('lo'))
  const res = await s.response
  s.upstream.push(USAGE + DONE)
  s.upstream.push(null)
  t.equal(await text(res), other('Other ').replace(/}\n\n$/, ',"_metadata":{"memory":null}}\n\n') + chunk('Hel') + other('reply') + chunk('lo') + DONE)
  t.same(s.saved, ['Hello'], 'choice 1 is not mixed into the saved reply')
  t.match(await s.outcome, { kind: 'completed', text: 'Hello' })
})

t.test('choice 0 finishing with "error" and no error event: relayed as it came, [DONE] too, nothing saved, a failed outcome', async (t) => {
  // OpenRouter's report of a failure while generating, here without a top-level `error`: the usage chunk and [DONE]
  // follow as after any finish.
  const finish = (index: number, reason: string): string =>
    `data: {"id":"gen-1","object":"chat.completion.chunk","choices":[{"index":${index},"delta":{"content":""},"finish_reason":"${reason}"}]}\n\n`
  const FAILED = finish(0, 'error')
  const s = await relay(t)
  s.upstream.push(chunk('Hel') + chunk('lo') + FAILED + USAGE + DONE)
  s.upstream.push(null)
  t.equal(await text(await s.response), chunk('Hel', ',"_metadata":{"memory":null}') + chunk('lo') + FAILED + DONE)
  t.same(await s.outcome, { kind: 'failed', error: undefined, text: 'Hello', usage: { prompt_tokens: 9, completion_tokens: 2 } })
  t.same(s.saved, [], 'nothing saved')

  // Relayed without capture (a chat that saves nothing), the finish is still found; the usage chunk asked for goes too.
  const uncaptured = await relay(t, { saves: false, needsReply: false, includeUsage: true })
  uncaptured.upstream.push(chunk('a') + chunk('b') + FAILED + USAGE + DONE)
  uncaptured.upstream.push(null)
  t.ok((await text(await uncaptured.response)).endsWith(chunk('b') + FAILED + USAGE + DONE))
  t.match(await uncaptured.outcome, { kind: 'failed', error: undefined })

  // A body that ends after it without [DONE]: as it came, no error event of ours (the upstream reported its failure).
  const cut = await relay(t)
  cut.upstream.push(chunk('a') + FAILED)
  cut.upstream.push(null)
  t.equal(await text(await cut.response), chunk('a', ',"_metadata":{"memory":null}') + FAILED)
  t.match(await cut.outcome, { kind: 'failed', error: undefined })

  // With n > 1, choice 0 decides, as for a JSON reply: another choice failing leaves the exchange complete, and choice 0
  // failing fails it while the other choices are still relayed to their end.
  const other = (content: string): string =>
    `data: {"id":"gen-1","object":"chat.completion.chunk","choices":[{"index":1,"delta":{"content":${JSON.stringify(content)}}}]}\n\n`
  const oneFails = await relay(t)
  oneFails.upstream.push(chunk('Hel') + other('x') + finish(1, 'error') + chunk('lo') + finish(0, 'stop') + USAGE + DONE)
  oneFails.upstream.push(null)
  t.match(await text(await oneFails.response), /data: \[DONE\]\n\n$/)
  t.match(await oneFails.outcome, { kind: 'completed', text: 'Hello' })
  t.same(oneFails.saved, ['Hello'])
  const zeroFails = await relay(t)
  zeroFails.upstream.push(chunk('Hel') + other('x') + FAILED + other('y') + finish(1, 'stop') + USAGE + DONE)
  zeroFails.upstream.push(null)
  t.ok((await text(await zeroFails.response)).endsWith(FAILED + other('y') + finish(1, 'stop') + DONE), 'the other choice relayed to its end')
  t.match(await zeroFails.outcome, { kind: 'failed', error: undefined, text: 'Hel' })
  t.same(zeroFails.saved, [])
})

t.test('choice 0 carrying an error object fails the exchange whatever its finish reason, as a JSON reply (isFailedChoice)', async (t) => {
  // The JSON path (messages/reply.ts generationFailed) has always counted a choice with an `error` object as failed; a
  // stream's choice is judged by the same test. Its text piece is captured (not read by the fast path: it has `error":`).
  const withError = (content: string, finish: string | null): string =>
    `data: ${JSON.stringify({ id: 'gen-1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content }, finish_reason: finish, error: { code: 502, message: 'Provider went away' } }] })}\n\n`
  const cases: Array<[string, string]> = [
    ['finish "stop"', withError('', 'stop')],
    ['no finish yet, with text', withError('!', null)],
  ]
  for (const [name, failing] of cases) {
    const s = await relay(t)
    s.upstream.push(chunk('Hel') + chunk('lo') + failing + USAGE + DONE)
    s.upstream.push(null)
    t.equal(await text(await s.response), chunk('Hel', ',"_metadata":{"memory":null}') + chunk('lo') + failing + DONE, `${name}: relayed as it came`)
    t.match(await s.outcome, { kind: 'failed', error: undefined, usage: { prompt_tokens: 9 } }, `${name}: a failed outcome`)
    t.same(s.saved, [], `${name}: nothing saved`)

    const uncaptured = await relay(t, { saves: false, needsReply: false })
    uncaptured.upstream.push(chunk('a') + chunk('b') + failing + USAGE + DONE)
    uncaptured.upstream.push(null)
    t.ok((await text(await uncaptured.response)).endsWith(chunk('b') + failing + DONE), `${name}: relayed without capture`)
    t.match(await uncaptured.outcome, { kind: 'failed', error: undefined }, `${name}: failed there too`)
  }
  // An `error: null` on the choice is no error.
  const nullError = `data: ${JSON.stringify({ id: 'gen-1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: '' }, finish_reason: 'stop', error: null }] })}\n\n`
  const s = await relay(t)
  s.upstream.push(chunk('Hi') + nullError + USAGE + DONE)
  s.upstream.push(null)
  t.match(await text(await s.response), /data: \[DONE\]\n\n$/)
  t.match(await s.outcome, { kind: 'completed' })
  t.same(s.saved, ['Hi'])
})

t.test("a streamed function_call (the deprecated functions API) is assembled into the saved reply, as a JSON reply's", async (t) => {
  const delta = (d: object, finish: string | null = null): string =>
    `data: ${JSON.stringify({ id: 'gen-1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: d, finish_reason: finish }] })}\n\n`
  const s = await relay(t)
  s.upstream.push(delta({ role: 'assistant', content: null, function_call: { name: 'get_weather', arguments: '' } }))
  s.upstream.push(delta({ function_call: { arguments: '{"city":' } }) + delta({ function_call: { arguments: '"Paris"}' } }))
  s.upstream.push(delta({}, 'function_call') + DONE)
  s.upstream.push(null)
  await text(await s.response)
  t.same(s.replies, [{ role: 'assistant', content: null, function_call: { name: 'get_weather', arguments: '{"city":"Paris"}' } }])
  t.match(await s.outcome, { kind: 'completed' })
})

t.test('a tool call whose name comes again in every fragment is saved with its name once, as the SDK shows it', async (t) => {
  // Some providers repeat `function.name` in each delta; the official SDK's stream assembly takes a name whole (it
  // replaces, and appends only the arguments), so the client sees `get_weather`: memory must keep what it saw.
  const delta = (d: object, finish: string | null = null): string =>
    `data: ${JSON.stringify({ id: 'gen-1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: d, finish_reason: finish }] })}\n\n`
  const call = (args: string, head = {}): object => ({ tool_calls: [{ index: 0, ...head, function: { name: 'get_weather', arguments: args } }] })
  const s = await relay(t)
  s.upstream.push(delta({ role: 'assistant', content: null, ...call('', { id: 'call_1', type: 'function' }) }))
  s.upstream.push(delta(call('{"city":')) + delta(call('"Oslo"}')))
  s.upstream.push(delta({ function_call: { name: 'legacy', arguments: '{' } }) + delta({ function_call: { name: 'legacy', arguments: '}' } }))
  s.upstream.push(delta({}, 'tool_calls') + DONE)
  s.upstream.push(null)
  await text(await s.response)
  t.same(s.replies, [
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }],
      function_call: { name: 'legacy', arguments: '{}' },
    },
  ])
})

t.test('an event whose data spans several data: lines reaches the client as several data: lines', async (t) => {
  // Legal SSE (the lines are joined with "\n", and JSON allows the break between tokens): written back as one line
  // with the break in it, the client read the second line as an unknown field and the first as broken JSON.
  const split = (content: string, extra = ''): string =>
    `data: {"id":"gen-1","object":"chat.completion.chunk",\ndata: "choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}}}]${extra}}\n\n`
  const s = await relay(t)
  s.upstream.push(split('Hel') + split('lo') + DONE)
  s.upstream.push(null)
  t.equal(await text(await s.response), split('Hel', ',"_metadata":{"memory":null}') + split('lo') + DONE)
  t.same(s.saved, ['Hello'])
})

t.test('the headers reach the client while the upstream has sent nothing yet', async (t) => {
  const s = await relay(t)
  const res = await s.response
  t.equal(res.statusCode, 200, 'headers out, no event yet')
  s.upstream.push(chunk('late') + DONE)
  s.upstream.push(null)
  t.match(await text(res), /late.*\[DONE\]/s)
})

t.test('a prefix (the Responses opening events) reaches the client while the upstream has sent nothing, then the events', async (t) => {
  const opening = 'event: response.created\ndata: {"type":"response.created"}\n\n'
  const s = await relay(t, { prefix: opening })
  const res = await s.response
  const first = (await once(res, 'data')) as [Buffer]
  t.equal(first[0].toString('utf8'), opening, 'the prefix alone, before any upstream event')
  s.upstream.push(chunk('late') + DONE)
  s.upstream.push(null)
  t.match(await text(res), /late.*\[DONE\]/s)
})

t.test('a body that ends with [DONE] is let go of without an error; one left open after [DONE] is cut', async (t) => {
  const clean = await relay(t)
  const errors: Error[] = []
  clean.upstream.on('error', (e) => errors.push(e))
  clean.upstream.push(chunk('x') + DONE)
  clean.upstream.push(null)
  await text(await clean.response)
  t.equal((await clean.outcome).kind, 'completed')
  await new Promise((r) => setImmediate(r))
  t.same(errors, [], 'ended on its own: not destroyed with an error')
  t.ok(clean.upstream.readableEnded)

  const open = await relay(t)
  open.upstream.push(chunk('y') + DONE)
  const body = await text(await open.response)
  t.ok(body.endsWith(DONE), 'the client still gets [DONE]')
  t.equal((await open.outcome).kind, 'completed')
  await new Promise((r) => setImmediate(r))
  t.ok(open.upstream.destroyed, 'the upstream body that stayed open is cut')
  open.upstream.push(chunk('after'))
  t.notMatch(body, /after/)
})

t.test('a client that stops reading stops the relay from reading the upstream', async (t) => {
  const s = await relay(t, { highWaterMark: 1024 })
  const res = await s.response
  res.pause()
  const event = chunk('z'.repeat(64 * 1024))
  const consumed = async (): Promise<boolean> => {
    for (let i = 0; i < 50; i++) {
      if (s.upstream.readableLength === 0) return true
      await new Promise((r) => setTimeout(r, 1))
    }
    return false
  }
  // Feed one event at a time until the relay stops taking them: the client's socket and ours are full.
  let taken = 0
  while (taken < 1000) {
    s.upstream.push(event)
    if (!(await consumed())) break
    taken++
  }
  t.ok(taken < 1000, `the relay stopped pulling after ${taken} events of 64 KiB`)
  const buffered = s.upstream.readableLength
  await new Promise((r) => setTimeout(r, 30))
  t.equal(s.upstream.readableLength, buffered, 'and stays stopped while the client does not read')
  s.upstream.push(DONE)
  s.upstream.push(null)
  res.resume()
  const body = await text(res)
  t.ok(body.endsWith(DONE), 'everything arrives once the client reads again')
  t.equal((await s.outcome).kind, 'completed')
})

t.test('a client that leaves mid-stream aborts the relay and the upstream', async (t) => {
  const s = await relay(t)
  s.upstream.push(chunk('partial'))
  const res = await s.response
  await once(res, 'data')
  res.destroy()
  t.same(await s.outcome, { kind: 'aborted' })
  await new Promise((r) => setImmediate(r))
  t.ok(s.upstream.destroyed, 'upstream destroyed')
  t.same(s.saved, [], 'nothing saved')
})
