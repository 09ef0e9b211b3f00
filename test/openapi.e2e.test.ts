/**
 * GET /openapi.json (issue 27, item 10): the whole API as OpenAPI 3.1, served with no key, and kept in step with the
 * routes the gateway registers: a route missing from the document, or a document path no route serves, fails here.
 * On every store engine (LMDB, and PostgreSQL when the test cluster is there): the keys requests authenticate with,
 * and their usage and traces, are the store's.
 */
import t from 'tap'
import { startHarness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'
import { ERROR_CODES } from '../src/errors.js'

interface Doc {
  openapi: string
  paths: Record<string, Record<string, { security: unknown[]; responses: Record<string, unknown> }>>
  components: { securitySchemes: Record<string, { type: string; in?: string; name?: string }> }
}

const METHODS = new Set(['get', 'post', 'delete', 'put', 'patch'])

for (const engine of testableEngines(t, 'openapi')) {
  t.test(`${engine.name}: the document names exactly the routes the gateway serves, with the key each needs`, async (t) => {
    const h = await startHarness(t, { engine })
    const res = await h.fetch('/openapi.json', { key: null, provider: null })
    t.equal(res.status, 200, 'served with no key')
    t.match(res.headers.get('content-type'), /^application\/json/)
    const raw = await res.text()
    const doc = JSON.parse(raw) as Doc
    t.equal(doc.openapi, '3.1.0')

    const served = new Map(h.gw.routes.map((r) => [`${r.method} ${r.path}`, r]))
    const documented = new Map<string, unknown[]>()
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, o] of Object.entries(ops)) {
        if (!METHODS.has(method)) continue
        documented.set(`${method.toUpperCase()} ${path.replace(/\{([^}]+)\}/g, ':$1')}`, o.security)
      }
    }
    t.same([...served.keys()].filter((k) => !documented.has(k)), [], 'every registered route is documented')
    t.same([...documented.keys()].filter((k) => !served.has(k)), [], 'the document names no route the gateway lacks')
    for (const [route, { auth, admin }] of served) {
      const security = documented.get(route) ?? []
      t.equal(security.length > 0, auth || admin, `${route}: ${auth ? 'needs a service key' : admin ? 'needs the admin key' : 'open'}`)
      if (auth) t.ok(security.every((s) => Object.keys(s as object).includes('serviceKey')), `${route} names the serviceKey scheme`)
      if (admin) t.same(security, [{ adminKey: [] }], `${route} names the adminKey scheme and no service key`)
    }
    t.match(doc.components.securitySchemes.serviceKey, { type: 'apiKey', in: 'header', name: 'serviceKey' })

    // Every reference resolves, and every error code the gateway emits is named in the error responses.
    for (const [, name] of raw.matchAll(/"\$ref":"#\/components\/([^"]+)"/g)) {
      const [kind, key] = (name as string).split('/') as [string, string]
      t.ok((doc.components as unknown as Record<string, Record<string, unknown>>)[kind]?.[key], `#/components/${name} exists`)
    }
    for (const code of Object.keys(ERROR_CODES)) t.ok(raw.includes(code), `error code ${code} is documented`)
  })
}
