/**
 * End-to-end harness: a mock OpenRouter on 127.0.0.1:0, a real gateway on 127.0.0.1:0 with a real LMDB in a temp
 * dir (and, given a store engine, that engine's store: a fresh PostgreSQL database for `postgres`), and the official
 * `openai` SDK pointed at the gateway. Tests get everything torn down through `t.teardown`.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import OpenAI from 'openai'
import { loadConfig, type Config } from '../../src/config.js'
import { startGateway, type Gateway, type GatewayOptions } from '../../src/main.js'
import { startMockUpstream, type MockUpstream, type MockUpstreamOptions } from '../../src/mock-upstream.js'
import type { StoreEngine } from './store-engines.js'

export const KEY_A = 'sk-test-tenant-a-0001-Vq8Zr3Lw5Ym2'
export const KEY_B = 'sk-test-tenant-b-0002-Vq8Zr3Lw5Ym2'
export const KEY_FREE = 'sk-test-free-plan-0003-Vq8Zr3Lw5Ym2'
export const PROVIDER_KEY = 'sk-or-v1-provider-secret-abcdef'

export interface Harness {
  gw: Gateway
  mock: MockUpstream
  dataDir: string
  /** Everything the gateway logged (JSON lines). */
  logs: () => string
  client(key?: string, opts?: { providerKey?: string; maxRetries?: number }): OpenAI
  /** Raw fetch against the gateway with the service key and provider key set unless overridden. */
  fetch(path: string, init?: RequestInit & { key?: string | null; provider?: string | null }): Promise<Response>
  restart(env?: Record<string, string>): Promise<void>
  close(): Promise<void>
}

interface Teardown {
  teardown(fn: () => unknown): void
}

export interface HarnessOptions {
  /** The store engine the gateway runs on (its configuration under `env`, which wins); LMDB alone when absent. */
  engine?: Pick<StoreEngine, 'env'>
  env?: Record<string, string>
  mock?: MockUpstreamOptions
  gateway?: GatewayOptions
  dataDir?: string
}

export async function startHarness(t: Teardown, opts: HarnessOptions = {}): Promise<Harness> {
  const env = { ...(await opts.engine?.env(t)), ...opts.env }
  const mock = await startMockUpstream(opts.mock ?? {})
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'recallgate-test-'))
  let logText = ''
  const makeConfig = (extra: Record<string, string> = {}): Config =>
    loadConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      UPSTREAM_BASE_URL: mock.url,
      DATA_DIR: dataDir,
      SERVICE_KEYS: `${KEY_A}:unlimited,${KEY_B}:unlimited,${KEY_FREE}:free`,
      LOG_LEVEL: 'info',
      SHUTDOWN_GRACE_MS: '2000',
      ...env,
      ...extra,
    })
  const start = async (extra?: Record<string, string>): Promise<Gateway> => {
    const sink = new PassThrough()
    sink.on('data', (d: Buffer) => {
      logText += d.toString('utf8')
    })
    return startGateway(makeConfig(extra), { logDestination: sink, onBootstrapKey: () => undefined, ...opts.gateway })
  }
  let gw = await start()
  let closed = false
  const h: Harness = {
    get gw() {
      return gw
    },
    mock,
    dataDir,
    logs: () => logText,
    client: (key = KEY_A, o = {}) =>
      new OpenAI({
        baseURL: `${gw.url}/api/v1`,
        apiKey: o.providerKey ?? PROVIDER_KEY,
        defaultHeaders: { serviceKey: key },
        maxRetries: o.maxRetries ?? 0,
        timeout: 20_000,
      }),
    fetch: (path, init = {}) => {
      const { key = KEY_A, provider = PROVIDER_KEY, headers, ...rest } = init
      const hs = new Headers(headers)
      if (key !== null && !hs.has('servicekey')) hs.set('serviceKey', key)
      if (provider !== null && !hs.has('authorization')) hs.set('authorization', `Bearer ${provider}`)
      return fetch(`${gw.url}${path}`, { ...rest, headers: hs })
    },
    restart: async (env) => {
      await gw.close()
      gw = await start(env)
    },
    close: async () => {
      if (closed) return
      closed = true
      await gw.close()
      await mock.close()
      if (opts.dataDir === undefined) rmSync(dataDir, { recursive: true, force: true })
    },
  }
  t.teardown(() => h.close())
  return h
}
