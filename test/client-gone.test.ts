/**
 * ClientGone (src/http/server.ts): the client's departure as a cheap EventEmitter that undici takes as a request's
 * `signal`, with an AbortSignal made only for code that asks for one.
 */
import { once } from 'node:events'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { Pool } from 'undici'
import { ClientGone } from '../src/http/client-gone.js'

t.test('abort: once, with the reason AbortController gives, seen by signals made before and after', async (t) => {
  const gone = new ClientGone()
  const early = gone.signal
  t.equal(gone.signal, early, 'one AbortSignal, made once')
  let fired = 0
  gone.on('abort', () => fired++)
  t.notOk(gone.aborted)
  t.notOk(early.aborted)
  gone.abort()
  gone.abort()
  t.equal(fired, 1, 'abort is emitted once')
  t.ok(gone.aborted)
  t.ok(early.aborted, 'a signal made before follows')
  t.match(gone.reason, { name: 'AbortError' })
  t.equal(early.reason, gone.reason)

  const late = new ClientGone()
  late.abort()
  t.ok(late.signal.aborted, 'a signal made after is already aborted')
  t.equal(late.signal.reason, late.reason)
})

t.test('undici cancels a request whose ClientGone fires', async (t) => {
  const server = createServer(() => {
    // Never answers: only the abort can end the request.
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
  t.teardown(async () => {
    await pool.destroy()
    server.closeAllConnections()
    server.close()
  })
  const gone = new ClientGone()
  const pending = pool.request({ method: 'GET', path: '/', signal: gone })
  setImmediate(() => gone.abort())
  await t.rejects(pending, { name: 'AbortError' }, 'rejected with the abort reason')
  t.equal(gone.listenerCount('abort'), 0, 'undici removed its listener')
})
