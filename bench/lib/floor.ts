/**
 * The floor: the least a Node proxy can do for this request — a node:http server that reads the request body and
 * relays it to the upstream through an undici Pool (keep-alive, pipelining 1, same as the gateway's client), then
 * streams the response back chunk by chunk with backpressure. No auth, validation, JSON parsing, metadata or logging.
 * Whatever recallgate adds beyond this is the cost of its features; whatever this adds is the cost of being a proxy.
 */
import { once } from 'node:events'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Pool } from 'undici'

export interface Floor {
  url: string
  close(): Promise<void>
}

export async function startFloor(o: { upstreamOrigin: string; connections: number }): Promise<Floor> {
  const pool = new Pool(o.upstreamOrigin, { connections: o.connections, pipelining: 1, keepAliveTimeout: 30_000 })
  const server: Server = createServer({ noDelay: true, keepAliveTimeout: 5_000 }, (req, res) => {
    const ac = new AbortController()
    res.once('close', () => {
      if (!res.writableFinished) ac.abort()
    })
    void (async () => {
      const parts: Buffer[] = []
      for await (const c of req as AsyncIterable<Buffer>) parts.push(c)
      const headers: Record<string, string> = {}
      for (const h of ['content-type', 'authorization', 'accept']) {
        const v = req.headers[h]
        if (typeof v === 'string') headers[h] = v
      }
      const up = await pool.request({
        method: req.method === 'GET' ? 'GET' : 'POST',
        path: req.url ?? '/',
        headers,
        body: parts.length ? Buffer.concat(parts) : undefined,
        signal: ac.signal,
      })
      const type = up.headers['content-type']
      res.writeHead(up.statusCode, typeof type === 'string' ? { 'content-type': type } : {})
      for await (const c of up.body as AsyncIterable<Buffer>) {
        if (!res.write(c)) await once(res, 'drain', { signal: ac.signal })
      }
      res.end()
    })().catch(() => {
      // The floor has one way to fail: drop the connection (the load generator counts it).
      res.destroy()
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await pool.destroy()
    },
  }
}
