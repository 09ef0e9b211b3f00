import { mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { KbBuilt } from './kb-build.js'
import { spawnRole } from './procs.js'

/**
 * The bench's knowledge base of `chunks` chunks for BENCH_KEY's tenant, built in a child process (the build holds a
 * core for minutes) or reused from $TMPDIR/recallgate-bench-cache/kb-<chunks>. The directory is a gateway's DATA_DIR.
 */
export async function cachedKnowledgeBase(serviceKey: string, chunks: number, log: (line: string) => void): Promise<{ dataDir: string; built: KbBuilt }> {
  const dataDir = join(tmpdir(), 'recallgate-bench-cache', `kb-${chunks}`)
  mkdirSync(dataDir, { recursive: true })
  log(`knowledge base: building or reusing ${chunks} chunks in ${dataDir}`)
  const builder = await spawnRole({ role: 'kb-build', options: { dataDir, serviceKey, chunks } }, { readyTimeoutMs: 30 * 60_000 })
  const built = JSON.parse(builder.url) as KbBuilt
  await builder.stop()
  log(`knowledge base: ${built.chunks} chunks in ${built.files} files (${built.cached ? 'cached' : `built in ${built.buildSeconds.toFixed(0)} s`})`)
  return { dataDir, built }
}
