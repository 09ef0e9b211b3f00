/**
 * The request log line is serialized by hand (src/log.ts, `logRequest`) instead of through pino: it must be the very
 * line pino would have written. And request lines reach stdout in batches (`RequestLineBatcher`) while every other
 * line goes out at once, in order. (That a real gateway's request lines reach stdout, and are flushed on SIGTERM, is
 * test/crash.test.ts's; that its "listening" line is seen at once, every child-gateway test's.)
 */
import { PassThrough } from 'node:stream'
import t from 'tap'
import pino from 'pino'
import { createLogger, logRequest, RequestLineBatcher, requestLogFields, requestLogLevel, type RequestLogInput } from '../src/log.js'

function capture(level = 'info') {
  const stream = new PassThrough()
  let text = ''
  stream.on('data', (b: Buffer) => (text += b.toString('utf8')))
  return { logger: createLogger({ level, destination: stream }), text: () => text }
}

const BASE: RequestLogInput = {
  requestId: 'req_0f8e6a1c',
  tenantId: 't_0123456789abcdef01234567',
  plan: 'pro',
  method: 'POST',
  route: '/api/v1/chat/completions',
  status: 200,
  durationMs: 1.23456,
}

const CASES: Array<[string, RequestLogInput]> = [
  ['a plain chat', { ...BASE, model: 'openai/gpt-4o', stream: false, upstreamMs: 0.5, promptTokens: 12, completionTokens: 30 }],
  ['a stream with its time to first token', { ...BASE, model: 'openai/gpt-4o', stream: true, ttftMs: 312.25, upstreamMs: 900 }],
  ['unauthenticated, a server fault (error level)', { ...BASE, tenantId: null, plan: null, route: 'unmatched', status: 503, errorCode: 'shutting_down' }],
  ['quotes and backslashes', { ...BASE, model: 'a/"quoted"\\name', errorCode: '"' }],
  ['control characters', { ...BASE, model: 'a/tab\there\nnewline' }],
  ['a string longer than 100 characters', { ...BASE, model: `vendor/${'x"'.repeat(60)}` }],
  ['a lone surrogate', { ...BASE, model: 'vendor/\ud800name' }],
  ['non-finite numbers', { ...BASE, durationMs: Infinity, promptTokens: NaN }],
  ['negative overhead clamps to zero', { ...BASE, durationMs: 1, upstreamMs: 2 }],
  ['a stream that failed after its 200 (error level)', { ...BASE, stream: true, streamFailure: 'upstream_reset', errorCode: 'upstream_unreachable', errorMessage: 'The upstream provider could not be reached (UND_ERR_SOCKET)' }],
  ['a stream the client left (info level)', { ...BASE, stream: true, streamFailure: 'client_gone', errorCode: 'client_closed_request' }],
]

/** The line pino itself writes for the same record (time aside), through the same logger's configuration. */
function viaPino(logger: pino.Logger, i: RequestLogInput): void {
  logger.child({}, { redact: { paths: [] } })[requestLogLevel(i.status, i.streamFailure)](requestLogFields(i), 'request')
}

const withoutTime = (line: string): string => line.replace(/"time":"[^"]*"/, '"time":"-"')

t.test('the hand-written line is the line pino writes, byte for byte', async (t) => {
  for (const [name, input] of CASES) {
    const ours = capture()
    logRequest(ours.logger, input)
    const theirs = capture()
    viaPino(theirs.logger, input)
    await new Promise((r) => setImmediate(r))
    t.equal(withoutTime(ours.text()), withoutTime(theirs.text()), name)
    t.match(ours.text(), /^\{"level":"(info|error)","time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z","pid":\d+,"hostname":/, `${name}: level, ISO time, pid, hostname`)
    t.ok(ours.text().endsWith('"msg":"request"}\n'), `${name}: one line`)
    t.doesNotThrow(() => JSON.parse(ours.text()), `${name}: valid JSON`)
  }
})

t.test('the time is the moment of logging, in toISOString form', async (t) => {
  for (let i = 0; i < 50; i++) {
    const log = capture()
    const before = Date.now()
    logRequest(log.logger, BASE)
    const after = Date.now()
    await new Promise((r) => setImmediate(r))
    const time = (JSON.parse(log.text()) as { time: string }).time
    const ms = Date.parse(time)
    if (!(before <= ms && ms <= after && new Date(ms).toISOString() === time)) {
      t.fail(`${time} is not the ISO time of a moment in [${before}, ${after}]`)
      return
    }
  }
  t.pass('50 lines, each stamped within its call, each exactly toISOString')
})

t.test('the logger level still applies', async (t) => {
  const log = capture('error')
  logRequest(log.logger, { ...BASE, status: 200 })
  logRequest(log.logger, { ...BASE, status: 502 })
  const silent = capture('silent')
  logRequest(silent.logger, { ...BASE, status: 502 })
  await new Promise((r) => setImmediate(r))
  const lines = log.text().split('\n').filter(Boolean)
  t.equal(lines.length, 1, 'an info line is dropped at level error')
  t.match(JSON.parse(lines[0] ?? '{}'), { level: 'error', status: 502 })
  t.equal(silent.text(), '', 'silent writes nothing')
})

t.test('a logger createLogger did not make is still served, through pino', async (t) => {
  const stream = new PassThrough()
  let text = ''
  stream.on('data', (b: Buffer) => (text += b.toString('utf8')))
  const other = pino({ base: { svc: 'x' } }, stream)
  logRequest(other, BASE)
  await new Promise((r) => setImmediate(r))
  t.match(JSON.parse(text), { svc: 'x', reqId: BASE.requestId, msg: 'request', level: 30 })
})

/** A sink that records writes and flushes, and timers the test fires by hand. */
function fakeSink() {
  const writes: string[] = []
  const calls: string[] = []
  const sink = {
    write: (d: string) => (writes.push(d), true),
    flush: (cb?: (err?: Error) => void) => (calls.push('flush'), cb?.()),
    flushSync: () => void calls.push('flushSync'),
  }
  const pending = new Map<number, { fn: () => void; ms: number }>()
  let next = 1
  const timers = {
    set: (fn: () => void, ms: number) => (pending.set(next, { fn, ms }), next++),
    clear: (h: unknown) => void pending.delete(h as number),
  }
  const fire = (): void => {
    for (const [h, p] of [...pending]) {
      pending.delete(h)
      p.fn()
    }
  }
  return { sink, writes, calls, timers, pending, fire }
}

const requestLine = (n: number): string => `{"level":"info","reqId":"req_${n}","msg":"request"}\n`

t.test('request lines are batched until the size bound', async (t) => {
  const f = fakeSink()
  const b = new RequestLineBatcher(f.sink, { maxChars: 3 * requestLine(0).length, timers: f.timers })
  b.request(requestLine(1))
  b.request(requestLine(2))
  t.same(f.writes, [], 'held')
  t.equal(f.pending.size, 1, 'one timer for the batch')
  b.request(requestLine(3))
  t.same(f.writes, [requestLine(1) + requestLine(2) + requestLine(3)], 'handed over in one write at the bound')
  t.equal(f.pending.size, 0, 'its timer cancelled')
})

t.test('… or until the delay bound', async (t) => {
  const f = fakeSink()
  const b = new RequestLineBatcher(f.sink, { maxDelayMs: 100, timers: f.timers })
  b.request(requestLine(1))
  b.request(requestLine(2))
  t.same([...f.pending.values()].map((p) => p.ms), [100], 'one timer, set by the first line')
  f.fire()
  t.same(f.writes, [requestLine(1) + requestLine(2)])
  b.request(requestLine(3))
  t.equal(f.pending.size, 1, 'a new batch, a new timer')
})

t.test('any other line goes out at once, after the request lines before it', async (t) => {
  const f = fakeSink()
  const b = new RequestLineBatcher(f.sink, { timers: f.timers })
  const listening = '{"level":"info","url":"http://127.0.0.1:8080","msg":"recallgate listening"}\n'
  b.write(listening)
  t.same(f.writes, [listening], 'not held')
  b.request(requestLine(1))
  const failed = '{"level":"error","reqId":"req_1","msg":"request failed"}\n'
  b.write(failed)
  t.same(f.writes, [listening, requestLine(1), failed], 'order kept')
  t.equal(f.pending.size, 0)
})

t.test('flush and flushSync hand the batch over first', async (t) => {
  const f = fakeSink()
  const b = new RequestLineBatcher(f.sink, { timers: f.timers })
  b.request(requestLine(1))
  let flushed = false
  b.flush(() => (flushed = true))
  t.same(f.writes, [requestLine(1)])
  t.same(f.calls, ['flush'])
  t.ok(flushed, 'the callback is passed on')
  b.request(requestLine(2))
  b.flushSync()
  t.same(f.writes, [requestLine(1), requestLine(2)])
  t.same(f.calls, ['flush', 'flushSync'])
  b.flushSync()
  t.same(f.writes.length, 2, 'nothing to hand over: no empty write')
})

t.test('through a batching destination, request lines are formatted at the hand-over: the same lines, in order', async (t) => {
  const f = fakeSink()
  // pino takes any object with write(): the production default is this batcher over sonic-boom.
  const batched = createLogger({ level: 'info', destination: new RequestLineBatcher(f.sink, { timers: f.timers }) as unknown as NodeJS.WritableStream })
  const direct = capture()
  for (const [, input] of CASES.slice(0, 3)) {
    logRequest(batched, input)
    logRequest(direct.logger, input)
  }
  t.same(f.writes, [], 'nothing formatted or written before the hand-over')
  batched.warn('after three requests')
  await new Promise((r) => setImmediate(r))
  t.equal(f.writes.length, 2, 'the batch, then the warning')
  const times = (text: string): string => text.replace(/"time":"[^"]*"/g, '"time":"-"')
  t.equal(times(f.writes[0] ?? ''), times(direct.text()), 'the lines logRequest writes unbatched')
  t.match(f.writes[1], /"msg":"after three requests"/)
})

t.test('a request record that cannot be formatted loses its line only, at the hand-over', async (t) => {
  const f = fakeSink()
  const batched = createLogger({ level: 'info', destination: new RequestLineBatcher(f.sink, { timers: f.timers }) as unknown as NodeJS.WritableStream })
  logRequest(batched, BASE)
  logRequest(batched, { ...BASE, requestId: undefined as unknown as string })
  logRequest(batched, { ...BASE, requestId: 'req_after' })
  t.doesNotThrow(() => f.fire(), 'the timer does not throw')
  t.equal(f.writes.length, 1)
  t.same((f.writes[0] ?? '').trim().split('\n').map((l) => (JSON.parse(l) as { reqId: string }).reqId), ['req_0f8e6a1c', 'req_after'])
})
