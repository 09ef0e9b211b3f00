/**
 * A stream that fails after its first byte (status 200 already sent) is not recorded as a success (issue 27): its
 * request line carries `streamFailure` and the error code, at `error` level unless the client left, and
 * `recallgate_stream_failures_total` counts it by reason. The mock upstream drops, stalls or errors a stream midway.
 * On every store engine (LMDB, and PostgreSQL when the test cluster is there): a failed stream's trace and usage are
 * written there as it ends.
 */
import t from 'tap'
import type OpenAI from 'openai'
import type { MockBehaviour } from '../src/mock-upstream.js'
import { KEY_A, PROVIDER_KEY, startHarness, type Harness } from './helpers/harness.js'
import { checkResponseStream } from './helpers/responses-stream-checker.js'
import { testableEngines } from './helpers/store-engines.js'

interface RequestLine {
  level: string
  reqId: string
  status: number
  streamFailure?: string
  errorCode?: string
  errorMessage?: string
}

/** The request line logged for `reqId`, waited for: it is written when the response has closed. */
async function lineOf(h: Harness, reqId: string): Promise<RequestLine> {
  for (let i = 0; ; i++) {
    const line = h
      .logs()
      .split('\n')
      .filter((l) => l.includes('"msg":"request"'))
      .map((l) => JSON.parse(l) as RequestLine)
      .find((l) => l.reqId === reqId)
    if (line !== undefined) return line
    if (i === 400) throw new Error(`no request line for ${reqId} in the log`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

async function failures(h: Harness): Promise<Record<string, number>> {
  const text = await (await h.fetch('/metrics', { key: null, provider: null })).text()
  const out: Record<string, number> = {}
  for (const m of text.matchAll(/^recallgate_stream_failures_total\{reason="([a-z_]+)"\} (\d+)$/gm)) out[m[1] as string] = Number(m[2])
  return out
}

/** A streamed chat read to its end as raw text (the SSE body), with its request id. */
async function streamChat(h: Harness, signal?: AbortSignal): Promise<{ status: number; reqId: string; text: string }> {
  const r = await h.fetch('/api/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'openai/gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'Tell me a story' }] }),
    signal,
  })
  return { status: r.status, reqId: r.headers.get('x-request-id') ?? '', text: await r.text() }
}

/** The data of each SSE event in a body (the gateway writes LF; comments skipped). */
function sseData(text: string): string[] {
  return text
    .split('\n\n')
    .map((block) => block.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n'))
    .filter((d) => d !== '')
}

for (const engine of testableEngines(t, 'stream failures')) {
  t.test(`${engine.name}: a stream that fails midway is logged with its error code and counted in /metrics by reason`, async (t) => {
    // A short body timeout, so a stalled stream fails soon (undici's timers are coarse: within about a second).
    const h = await startHarness(t, { engine,
      env: { UPSTREAM_BODY_TIMEOUT_MS: '400' },
      mock: { behaviour: { reply: 'a reply long enough to come in several chunks', chunkChars: 5 } },
    })
    t.same(
      await failures(h),
      { upstream_reset: 0, upstream_timeout: 0, upstream_invalid: 0, upstream_error: 0, client_gone: 0, internal: 0 },
      'every reason is exported from the start, at 0',
    )

    const cases: Array<{ name: string; behaviour: MockBehaviour; reason: string; code: string; message: RegExp | 'none' }> = [
      { name: 'upstream reset', behaviour: { reset: 'mid-stream' }, reason: 'upstream_reset', code: 'upstream_unreachable', message: /could not be reached/ },
      { name: 'upstream stalls', behaviour: { hang: 'mid-stream' }, reason: 'upstream_timeout', code: 'upstream_timeout', message: /did not answer in time/ },
      { name: 'invalid SSE', behaviour: { invalidSse: true }, reason: 'upstream_invalid', code: 'upstream_invalid_response', message: /SSE|\[DONE\]/ },
      { name: "the upstream's error event", behaviour: { midStreamError: { afterChunks: 2, message: 'Provider went away' } }, reason: 'upstream_error', code: 'upstream_error', message: 'none' },
    ]
    const expected: Record<string, number> = { upstream_reset: 0, upstream_timeout: 0, upstream_invalid: 0, upstream_error: 0, client_gone: 0, internal: 0 }
    for (const c of cases) {
      h.mock.enqueue(c.behaviour)
      const r = await streamChat(h)
      t.equal(r.status, 200, `${c.name}: the stream had begun`)
      t.notMatch(r.text, /\[DONE\]/, `${c.name}: and did not complete`)
      const line = await lineOf(h, r.reqId)
      t.match(line, { level: 'error', status: 200, streamFailure: c.reason, errorCode: c.code }, `${c.name}: the request line says it failed`)
      if (c.message === 'none') t.notOk('errorMessage' in line, `${c.name}: not the upstream's own text (it may quote the request)`)
      else t.match(line.errorMessage, c.message, `${c.name}: with our message`)
      expected[c.reason] = (expected[c.reason] ?? 0) + 1
      t.same(await failures(h), expected, `${c.name}: counted as ${c.reason}`)
    }

    // The client leaves after the first chunk: counted, but logged at info (not the gateway's fault).
    h.mock.enqueue({ hang: 'mid-stream' })
    const ac = new AbortController()
    const r = await h.fetch('/api/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'Tell me a story' }] }),
      signal: ac.signal,
    })
    await (r.body as ReadableStream<Uint8Array>).getReader().read()
    ac.abort()
    const left = await lineOf(h, r.headers.get('x-request-id') ?? '')
    t.match(left, { level: 'info', status: 200, streamFailure: 'client_gone', errorCode: 'client_closed_request' })
    expected.client_gone = 1
    t.same(await failures(h), expected, 'the client leaving is counted as client_gone')

    // A stream that completes is neither.
    const ok = await streamChat(h)
    t.match(ok.text, /\[DONE\]/)
    const line = await lineOf(h, ok.reqId)
    t.notOk('streamFailure' in line || 'errorCode' in line, 'a completed stream has no failure or error code')
    t.equal(line.level, 'info')
    t.same(await failures(h), expected, 'and is not counted')

    // The openai SDK agrees with the log: the failed stream is an error to it too.
    h.mock.enqueue({ reset: 'mid-stream' })
    const stream = await h.client(KEY_A, { providerKey: PROVIDER_KEY }).chat.completions.create({ model: 'openai/gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'x' }] })
    const err = await (async () => {
      for await (const _ of stream) void _
    })().catch((e: unknown) => e)
    t.type(err, Error, 'the SDK raises the failure')
    expected.upstream_reset = (expected.upstream_reset ?? 0) + 1
    for (let i = 0; (await failures(h)).upstream_reset !== expected.upstream_reset; i++) {
      if (i === 200) throw new Error('the SDK-seen reset was never counted')
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    t.pass('counted as upstream_reset')
  })

  t.test(`${engine.name}: a choice that finishes with "error" and no error event is a failed exchange on every path, as one with the event`, async (t) => {
    // OpenRouter's report of a failure while generating: choice 0 finishes with "error", and here no top-level `error`
    // comes with it; the usage chunk and [DONE] follow as after any finish (the mock's choiceError, on its real wire
    // format: CRLF, keep-alive comments, bytes split anywhere).
    const reply = 'a reply long enough to come in several chunks'
    const h = await startHarness(t, { engine, mock: { behaviour: { reply, chunkChars: 5, crlf: true, keepAliveComments: 2, splitWrites: 'random' } } })
    const wire = { crlf: true, keepAliveComments: 2, splitWrites: 'random' as const }
    const expected: Record<string, number> = { ...(await failures(h)) }
    const messagesOf = async (id: string): Promise<number> => {
      const r = await h.fetch(`/api/v1/sessions/${id}`)
      return r.status === 404 ? 0 : ((await r.json()) as { messages: unknown[] }).messages.length
    }
    const chat = async (extra: Record<string, unknown>, b: MockBehaviour): Promise<{ reqId: string; text: string; status: number }> => {
      h.mock.enqueue({ reply, chunkChars: 5, ...wire, ...b })
      const r = await h.fetch('/api/v1/chat/completions', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Tell me a story' }], useRAG: false, ...extra }),
      })
      return { status: r.status, reqId: r.headers.get('x-request-id') ?? '', text: await r.text() }
    }

    // A session with one completed exchange: what a failed one must leave as it is.
    await chat({ sessionId: 'cs' }, {})
    t.equal(await messagesOf('cs'), 2)

    const streams: Array<{ name: string; extra: Record<string, unknown>; behaviour: MockBehaviour }> = [
      { name: 'a text piece, read without a parse', extra: { sessionId: 'cs' }, behaviour: { choiceError: { afterChunks: 2 } } },
      { name: 'the choice carrying its error', extra: { sessionId: 'cs' }, behaviour: { choiceError: { afterChunks: 2, inChoice: true, message: 'Provider went away' } } },
      { name: 'tool calls', extra: { sessionId: 'cs', tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] }, behaviour: { toolCalls: [{ name: 'f', arguments: '{"a":1}' }], choiceError: {} } },
      { name: 'the usage chunk asked for', extra: { sessionId: 'cs', stream_options: { include_usage: true } }, behaviour: { choiceError: { afterChunks: 1 } } },
      { name: 'nothing to save (no session)', extra: {}, behaviour: { choiceError: { afterChunks: 3 } } },
      { name: 'saveToMemory: false', extra: { sessionId: 'cs', saveToMemory: false }, behaviour: { choiceError: {} } },
      // The choice's `error` object is the only sign (finish "stop"): failed, as a JSON reply with one is.
      { name: 'an error object beside finish "stop"', extra: { sessionId: 'cs' }, behaviour: { choiceError: { afterChunks: 2, inChoice: true, finishReason: 'stop' } } },
      { name: 'an error object beside finish "stop", nothing to save', extra: {}, behaviour: { choiceError: { afterChunks: 2, inChoice: true, finishReason: 'stop' } } },
    ]
    for (const c of streams) {
      const r = await chat({ stream: true, ...c.extra }, c.behaviour)
      t.equal(r.status, 200, `${c.name}: the stream had begun`)
      const events = sseData(r.text)
      const finish = events.find((d) => d.includes('"finish_reason":"error"') || d.includes('"error":{'))
      t.ok(finish, `${c.name}: the failing choice reaches the client`)
      t.notOk(events.some((d) => d !== '[DONE]' && 'error' in (JSON.parse(d) as object)), `${c.name}: as it came, no error event of ours added`)
      t.equal(events.at(-1), '[DONE]', `${c.name}: and the rest as it came, [DONE] too`)
      if (c.extra.stream_options !== undefined) t.match(JSON.parse(events.at(-2) ?? '{}'), { choices: [], usage: { prompt_tokens: Number } }, `${c.name}: the usage chunk relayed`)
      t.equal(await messagesOf('cs'), 2, `${c.name}: nothing saved`)
      const line = await lineOf(h, r.reqId)
      t.match(line, { level: 'error', status: 200, streamFailure: 'upstream_error', errorCode: 'upstream_error' }, `${c.name}: the request line says it failed`)
      t.type((line as { promptTokens?: unknown }).promptTokens, 'number', `${c.name}: with the tokens the upstream reported`)
      expected.upstream_error = (expected.upstream_error ?? 0) + 1
      t.same(await failures(h), expected, `${c.name}: counted as upstream_error`)
    }

    // The same through the openai SDK: the stream is read to its end, choice 0 says "error", and nothing is saved.
    h.mock.enqueue({ reply, ...wire, choiceError: { afterChunks: 2 } })
    const sdkStream = await h.client(KEY_A, { providerKey: PROVIDER_KEY }).chat.completions.create({
      model: 'openai/gpt-4o-mini',
      stream: true,
      messages: [{ role: 'user', content: 'x' }],
      ...({ sessionId: 'cs', useRAG: false } as object),
    })
    let finishReason: string | null | undefined
    for await (const c of sdkStream) finishReason = c.choices[0]?.finish_reason ?? finishReason
    t.equal(finishReason, 'error')
    t.equal(await messagesOf('cs'), 2, 'the SDK-read stream saved nothing')
    expected.upstream_error = (expected.upstream_error ?? 0) + 1
    for (let i = 0; (await failures(h)).upstream_error !== expected.upstream_error; i++) {
      if (i === 200) throw new Error('the SDK-read stream was never counted')
      await new Promise((resolve) => setTimeout(resolve, 25))
    }

    // And a choice whose `error` object is the only sign (finish "stop"): the SDK reads a stop, the gateway a failure.
    h.mock.enqueue({ reply, ...wire, choiceError: { afterChunks: 2, inChoice: true, finishReason: 'stop', message: 'Provider went away' } })
    const sdkStopped = await h.client(KEY_A, { providerKey: PROVIDER_KEY }).chat.completions.create({
      model: 'openai/gpt-4o-mini',
      stream: true,
      messages: [{ role: 'user', content: 'x' }],
      ...({ sessionId: 'cs', useRAG: false } as object),
    })
    let choiceErrorSeen: unknown
    for await (const c of sdkStopped) choiceErrorSeen ??= (c.choices[0] as { error?: unknown } | undefined)?.error
    t.match(choiceErrorSeen, { message: 'Provider went away' }, 'the SDK gets the choice with its error as it came')
    t.equal(await messagesOf('cs'), 2, 'an error object beside finish "stop": the SDK-read stream saved nothing')
    expected.upstream_error = (expected.upstream_error ?? 0) + 1
    for (let i = 0; (await failures(h)).upstream_error !== expected.upstream_error; i++) {
      if (i === 200) throw new Error('the SDK-read stream with an error object was never counted')
      await new Promise((resolve) => setTimeout(resolve, 25))
    }

    // JSON: relayed as it came, nothing saved (as before).
    const json = await chat({ sessionId: 'cs' }, { choiceError: { message: 'Provider went away' } })
    t.equal(json.status, 200)
    t.match(JSON.parse(json.text), { choices: [{ finish_reason: 'error' }] })
    t.equal(await messagesOf('cs'), 2, 'JSON: nothing saved')
    const jsonStopped = await chat({ sessionId: 'cs' }, { choiceError: { message: 'Provider went away', finishReason: 'stop' } })
    t.match(JSON.parse(jsonStopped.text), { choices: [{ finish_reason: 'stop', error: { message: 'Provider went away' } }] })
    t.equal(await messagesOf('cs'), 2, 'JSON, an error object beside finish "stop": nothing saved (as a stream)')
    expected.upstream_error = (expected.upstream_error ?? 0) + 2
    for (const r of [json, jsonStopped]) {
      t.match(await lineOf(h, r.reqId), { level: 'error', status: 200, streamFailure: 'upstream_error', errorCode: 'upstream_error' }, 'JSON: the request line says it failed')
    }
    t.same(await failures(h), expected, 'JSON: counted as upstream_error, as the stream would be')

    // Through the openai SDK: the client gets the reply as it came (a 200, the choice and its error untouched), while the
    // log, the metrics and the trace read it as the failure it is; a JSON reply that completes reads as a success.
    const sdk = h.client(KEY_A, { providerKey: PROVIDER_KEY })
    h.mock.enqueue({ reply, choiceError: { message: 'Provider went away' } })
    const { data: failedReply, response: failedRes } = await sdk.chat.completions
      .create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'x' }], ...({ sessionId: 'cs', useRAG: false } as object) })
      .withResponse()
    t.equal(failedRes.status, 200)
    t.match(failedReply.choices[0], { finish_reason: 'error', message: { content: reply }, error: { code: 502, message: 'Provider went away' } }, 'the SDK gets the reply as it came')
    t.match(failedReply, { _metadata: { memory: { sessionId: 'cs' } } })
    t.equal(await messagesOf('cs'), 2, 'the SDK-read JSON reply saved nothing')
    const failedId = failedRes.headers.get('x-request-id') ?? ''
    t.match(await lineOf(h, failedId), { level: 'error', status: 200, stream: false, streamFailure: 'upstream_error', errorCode: 'upstream_error', promptTokens: Number })
    expected.upstream_error = (expected.upstream_error ?? 0) + 1
    t.same(await failures(h), expected, 'the SDK-read JSON reply counted as upstream_error')
    const traced = (await (await h.fetch(`/api/v1/requests/${failedId}`)).json()) as { status: number; error: unknown }
    t.equal(traced.status, 200, 'traced with the status the client got')
    t.match(traced.error, { code: 'upstream_error', message: String }, 'and the failure')
    t.notOk(JSON.stringify(traced.error).includes('Provider went away'), "never the upstream's own words")
    h.mock.enqueue({ reply })
    const { response: okRes } = await sdk.chat.completions
      .create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'x' }], ...({ useRAG: false } as object) })
      .withResponse()
    const okId = okRes.headers.get('x-request-id') ?? ''
    const okLine = await lineOf(h, okId)
    t.equal(okLine.level, 'info')
    t.notOk('streamFailure' in okLine || 'errorCode' in okLine, 'a completed JSON reply has no failure')
    t.equal(((await (await h.fetch(`/api/v1/requests/${okId}`)).json()) as { error: unknown }).error, null, 'nor in its trace')
    t.same(await failures(h), expected, 'nor is it counted')

    // Responses: a stream ends with `error` then response.failed, carrying the error the error event's mapping makes,
    // and nothing is stored (neither the response nor the conversation's messages).
    const responses = async (body: Record<string, unknown>, b: MockBehaviour): Promise<{ status: number; reqId: string; text: string }> => {
      h.mock.enqueue({ reply, chunkChars: 5, ...wire, ...b })
      const r = await h.fetch('/api/v1/responses', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'openai/gpt-4o-mini', input: 'Tell me a story', useRAG: false, ...body }),
      })
      return { status: r.status, reqId: r.headers.get('x-request-id') ?? '', text: await r.text() }
    }
    const first = await responses({ sessionId: 'rs' }, {})
    t.equal(first.status, 200)
    t.equal(await messagesOf('rs'), 2)
    const cases: Array<{ name: string; behaviour: MockBehaviour; message: string }> = [
      { name: 'Responses, a bare finish with "error"', behaviour: { choiceError: { afterChunks: 2 } }, message: 'Upstream returned an error: ' },
      { name: 'Responses, the choice carrying its error', behaviour: { choiceError: { afterChunks: 2, inChoice: true, message: 'Provider went away' } }, message: 'Upstream returned an error: Provider went away' },
      { name: 'Responses, tool calls', behaviour: { toolCalls: [{ name: 'f', arguments: '{"a":1}' }], choiceError: {} }, message: 'Upstream returned an error: ' },
      { name: 'Responses, an error object beside finish "stop"', behaviour: { choiceError: { afterChunks: 2, inChoice: true, finishReason: 'stop', message: 'Provider went away' } }, message: 'Upstream returned an error: Provider went away' },
      { name: 'Responses, the error event (as before)', behaviour: { midStreamError: { afterChunks: 2, message: 'Provider went away' } }, message: 'Upstream returned an error: Provider went away' },
    ]
    for (const c of cases) {
      const tools = c.behaviour.toolCalls === undefined ? {} : { tools: [{ type: 'function', name: 'f', parameters: {} }] }
      const r = await responses({ stream: true, sessionId: 'rs', ...tools }, c.behaviour)
      t.equal(r.status, 200, `${c.name}: the stream had begun`)
      const events = sseData(r.text).map((d) => JSON.parse(d) as Record<string, unknown>)
      t.same(checkResponseStream(events), [], `${c.name}: a well-formed stream`)
      t.same(events.slice(-2).map((e) => e.type), ['error', 'response.failed'], `${c.name}: ends with error, then response.failed`)
      const failed = events.at(-1)?.response as { id: string; status: string; error: { code: string; message: string }; output: unknown[] }
      t.equal(failed.status, 'failed')
      // The message open when the failure came is closed as incomplete, with the text the client was shown, and is in the
      // failed response's output; a call the model was still writing is left out (clients run calls on output_item.done).
      if (c.behaviour.toolCalls === undefined) {
        t.match(failed.output, [{ type: 'message', status: 'incomplete', content: [{ type: 'output_text', text: reply.slice(0, 10) }] }], `${c.name}: the open message, incomplete`)
        t.equal(failed.output.length, 1)
      } else t.same(failed.output, [], `${c.name}: the unfinished call left out`)
      t.equal(failed.error.code, 'upstream_error', `${c.name}: the code the error event gets`)
      t.ok(failed.error.message.startsWith(c.message), `${c.name}: ${failed.error.message}`)
      t.match(events.at(-2), { code: 'upstream_error', message: failed.error.message })
      t.equal((await h.fetch(`/api/v1/responses/${failed.id}`)).status, 404, `${c.name}: the response is not stored`)
      t.equal(await messagesOf('rs'), 2, `${c.name}: nor the conversation's messages`)
      t.match(await lineOf(h, r.reqId), { level: 'error', status: 200, streamFailure: 'upstream_error', errorCode: 'upstream_error' }, `${c.name}: the request line says it failed`)
      expected.upstream_error = (expected.upstream_error ?? 0) + 1
      t.same(await failures(h), expected, `${c.name}: counted as upstream_error`)
    }
    const rjson = await responses({ sessionId: 'rs' }, { choiceError: { message: 'Provider went away' } })
    t.equal(rjson.status, 502, 'Responses JSON: an error, as before')
    t.match(JSON.parse(rjson.text), { error: { code: 'upstream_error', message: 'Upstream returned an error: Provider went away' } }, 'Responses JSON: the same error as a stream')
    t.equal(await messagesOf('rs'), 2, 'Responses JSON: nothing saved')
    const rjsonStopped = await responses({ sessionId: 'rs' }, { choiceError: { message: 'Provider went away', finishReason: 'stop' } })
    t.equal(rjsonStopped.status, 502, 'Responses JSON, an error object beside finish "stop": an error, as its stream')
    t.match(JSON.parse(rjsonStopped.text), { error: { code: 'upstream_error', message: 'Upstream returned an error: Provider went away' } })
    t.equal(await messagesOf('rs'), 2, 'Responses JSON, an error object beside finish "stop": nothing saved')
    t.same(await failures(h), expected, 'Responses JSON: not a stream failure')

    // Through the openai SDK, a Responses stream whose choice carries an error object beside finish "stop" raises.
    h.mock.enqueue({ reply, chunkChars: 5, ...wire, choiceError: { afterChunks: 2, inChoice: true, finishReason: 'stop', message: 'Provider went away' } })
    const rstream = await h.client(KEY_A, { providerKey: PROVIDER_KEY }).responses.create({
      model: 'openai/gpt-4o-mini',
      input: 'Tell me a story',
      stream: true,
      ...({ sessionId: 'rs', useRAG: false } as object),
    } as OpenAI.Responses.ResponseCreateParamsStreaming)
    const seen: OpenAI.Responses.ResponseStreamEvent[] = []
    const rerr = await (async () => {
      for await (const e of rstream) seen.push(e)
    })().catch((e: unknown) => e)
    t.type(rerr, Error, 'the SDK raises the failed Responses stream')
    t.match(seen.at(-1), { type: 'response.output_item.done', item: { type: 'message', status: 'incomplete', content: [{ text: reply.slice(0, 10) }] } }, 'after the open message, closed as incomplete with its text so far')
    t.match((rerr as Error).message, /Provider went away/)
    t.equal(await messagesOf('rs'), 2, 'the SDK-read Responses stream saved nothing')
  })
}

for (const engine of testableEngines(t, 'stream failures: token count calibration')) {
  t.test(`${engine.name}: a failed stream's usage feeds the token count calibration, as a completed one's does`, async (t) => {
    // The upstream counts 20 % more prompt tokens than the gateway: what the calibration learns, per model, from usage.
    const h = await startHarness(t, { engine, mock: { promptTokenFactor: 1.2, behaviour: { reply: 'a reply long enough to come in several chunks', chunkChars: 5 } } })
    const prompt = 'a long enough prompt to be learned from, with words enough to count. '.repeat(8)
    const correction = async (model: string): Promise<number | undefined> => {
      const text = await (await h.fetch('/metrics', { key: null, provider: null })).text()
      const m = new RegExp(`^recallgate_token_count_correction\\{model="${model.replace('/', '\\/').replaceAll('.', '\\.')}"\\} ([\\d.]+)$`, 'm').exec(text)
      return m === null ? undefined : Number(m[1])
    }
    const client = h.client(KEY_A, { providerKey: PROVIDER_KEY })

    // Chat: choice 0 finishes with "error", then the usage chunk and [DONE] (the SDK reads it to its end).
    h.mock.enqueue({ choiceError: { afterChunks: 2 } })
    const chat = await client.chat.completions.create({ model: 'anthropic/claude-3.5-sonnet', stream: true, messages: [{ role: 'user', content: prompt }], ...({ useRAG: false } as object) })
    let finish: string | null | undefined
    for await (const c of chat) finish = c.choices[0]?.finish_reason ?? finish
    t.equal(finish, 'error', 'the stream failed')
    let chatRatio: number | undefined
    for (let i = 0; (chatRatio = await correction('anthropic/claude-3.5-sonnet')) === undefined; i++) {
      if (i === 200) break
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    t.ok(chatRatio !== undefined && chatRatio > 1, `chat: learned from the failed stream's usage (${String(chatRatio)})`)

    // Responses: the same failure, through the SDK, which raises it.
    h.mock.enqueue({ choiceError: { afterChunks: 2 } })
    const responses = await client.responses.create({ model: 'openai/gpt-4o', input: prompt, stream: true, ...({ useRAG: false } as object) } as OpenAI.Responses.ResponseCreateParamsStreaming)
    const err = await (async () => {
      for await (const _ of responses) void _
    })().catch((e: unknown) => e)
    t.type(err, Error, 'the Responses stream failed')
    let responsesRatio: number | undefined
    for (let i = 0; (responsesRatio = await correction('openai/gpt-4o')) === undefined; i++) {
      if (i === 200) break
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    t.ok(responsesRatio !== undefined && responsesRatio > 1, `Responses: learned from the failed stream's usage (${String(responsesRatio)})`)
    t.equal(await correction('openai/gpt-4o-mini'), undefined, 'a model never used has learned nothing')
  })
}
