/** `recallgate serve --workers 2` as a child process, and requests that spread over its workers. */
import { request } from 'node:http'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import { spawnGateway, type ChildGateway } from './child-gateway.js'
import { until } from './until.js'

// Child gateways start in ~1 s from dist (CI), but from source under a loaded machine each can take tens of seconds.
export const READY = { readyTimeoutMs: 150_000 }

/** A request on a connection of its own, so node:cluster's round-robin spreads them over the workers. */
export function fresh(url: string, path: string, key?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { agent: false, headers: key === undefined ? {} : { serviceKey: key } }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
    })
    req.on('error', reject)
    req.end()
  })
}

/** The pids of the workers that answered `route`, read from the request log (complete once the primary has exited). */
export function answeredBy(gw: ChildGateway, route: string): Set<number> {
  return new Set(
    gw
      .stdout()
      .split('\n')
      .filter((l) => l.includes(`"route":"${route}"`))
      .map((l) => (JSON.parse(l) as { pid: number }).pid),
  )
}

/** `serve --workers 2` on a temp DATA_DIR, resolved once both workers listen. */
export async function startWorkers(t: Test, env: Record<string, string>): Promise<ChildGateway> {
  const dataDir = mkdtempSync(join(tmpdir(), 'recallgate-workers-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const gw = await spawnGateway({ DATA_DIR: dataDir, ...env }, { args: ['--workers', '2'], ...READY })
  t.teardown(() => gw.stop())
  const listening = (): number => gw.stdout().split('\n').filter((l) => l.includes('recallgate listening')).length
  await until(() => listening() >= 2, 'both workers of serve --workers 2 to log "recallgate listening"')
  return gw
}
