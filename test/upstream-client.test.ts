/**
 * The upstream client against a real server on a real socket: the keep-alive race (the provider closes a pooled
 * connection as a request goes out on it) is retried once on another connection; anything else that drops a
 * request reaches the caller as the upstream's failure, without a second try.
 */
import { createServer } from 'node:http'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { readUpstreamBody, UpstreamClient } from '../src/upstream/client.js'

/**
 * A server that drops (destroys the connection of) the requests `drop` names, by their number on their connection and
 * overall, and answers the others with those numbers.
 */
async function server(t: Test, drop: (onConnection: number, overall: number) => boolean): Promise<{ url: string; requests: () => number }> {
  let requests = 0
  const served = new WeakMap<object, number>()
  const s = createServer((req, res) => {
    const overall = ++requests
    const n = (served.get(req.socket) ?? 0) + 1
    served.set(req.socket, n)
    req.resume()
    req.on('end', () => {
      if (drop(n, overall)) return void req.socket.destroy()
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ onConnection: n }))
    })
  })
  s.listen(0, '127.0.0.1')
  await once(s, 'listening')
  t.teardown(() => {
    s.closeAllConnections()
    s.close()
  })
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}/api/v1`, requests: () => requests }
}

function client(t: Test, baseUrl: string): UpstreamClient {
  // One connection: a second request goes out on the first one's connection.
  const c = new UpstreamClient({ baseUrl, connectTimeout: 2_000, headersTimeout: 2_000, bodyTimeout: 2_000, connections: 1 })
  t.teardown(() => c.destroy())
  return c
}

const chat = (c: UpstreamClient) => c.chat('{"model":"m","messages":[]}', { authorization: 'Bearer k', signal: new AbortController().signal, stream: false })

t.test('a kept-alive connection the upstream closed under a request: sent again on a new one, answered', async (t) => {
  const s = await server(t, (n) => n === 2)
  const c = client(t, s.url)
  t.equal((await chat(c)).status, 200)
  const res = await chat(c)
  t.equal(res.status, 200, 'answered, not a 502')
  t.same(JSON.parse(await readUpstreamBody(res.body, 1_000)), { onConnection: 1 }, 'on a new connection')
  t.equal(s.requests(), 3, 'the dropped request sent once more')
})

t.test('dropped on a new connection: the upstream failed, a 502, not sent again', async (t) => {
  const s = await server(t, () => true)
  await t.rejects(chat(client(t, s.url)), { code: 'upstream_unreachable', status: 502 })
  t.equal(s.requests(), 1)
})

t.test('dropped on a kept-alive connection and again on the new one: a 502 after one more try', async (t) => {
  const s = await server(t, (_, overall) => overall >= 2)
  const c = client(t, s.url)
  t.equal((await chat(c)).status, 200)
  await t.rejects(chat(c), { code: 'upstream_unreachable', status: 502 })
  t.equal(s.requests(), 3, 'the first answered, the second sent twice')
})
