/**
 * CORS_ORIGINS: a browser page on an allowed origin can call the API (its preflight is answered, every answer names the
 * origin and exposes the headers a client reads, errors included); any other origin gets no CORS header; and without
 * the setting nothing changes (no CORS header, OPTIONS is a 405 as any method a route does not take).
 * On every store engine (LMDB, and PostgreSQL when the test cluster is there): the keys requests authenticate with,
 * and their usage and traces, are the store's.
 */
import t from 'tap'
import { KEY_A, PROVIDER_KEY, startHarness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'

const APP = 'https://app.example'

function preflight(url: string, origin: string, headers = 'authorization,content-type,servicekey,x-stainless-os'): Promise<Response> {
  return fetch(`${url}/api/v1/chat/completions`, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': headers },
  })
}

for (const engine of testableEngines(t, 'cors')) {
  t.test(`${engine.name}: CORS_ORIGINS: an allowed page calls the API; another origin gets no CORS header`, async (t) => {
    const h = await startHarness(t, { engine, env: { CORS_ORIGINS: `${APP}, http://localhost:5173` } })
    const url = h.gw.url

    const ok = await preflight(url, APP)
    t.equal(ok.status, 204, 'the preflight is answered before routing and authentication')
    t.equal(ok.headers.get('access-control-allow-origin'), APP)
    t.equal(ok.headers.get('access-control-allow-methods'), 'GET, POST, DELETE')
    t.equal(ok.headers.get('access-control-allow-headers'), 'authorization,content-type,servicekey,x-stainless-os', 'the headers the page asked for')
    t.equal(ok.headers.get('vary'), 'Origin')
    t.equal((await preflight(url, 'http://localhost:5173')).headers.get('access-control-allow-origin'), 'http://localhost:5173', 'each listed origin')

    const chat = await fetch(`${url}/api/v1/chat/completions`, {
      method: 'POST',
      headers: { origin: APP, 'content-type': 'application/json', servicekey: KEY_A, authorization: `Bearer ${PROVIDER_KEY}` },
      body: JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
    })
    t.equal(chat.status, 200)
    t.equal(chat.headers.get('access-control-allow-origin'), APP, 'the answer names the page')
    t.match(chat.headers.get('access-control-expose-headers') ?? '', /x-request-id.*x-ratelimit-remaining-requests.*retry-after/, 'and lets it read the ids and limits')

    const refused = await fetch(`${url}/api/v1/sessions`, { headers: { origin: APP } })
    t.equal(refused.status, 401)
    t.equal(refused.headers.get('access-control-allow-origin'), APP, 'an error answer too, so the page can read why')

    const other = await preflight(url, 'https://evil.example')
    t.equal(other.status, 405, "another origin's preflight is not answered as one")
    t.equal(other.headers.get('access-control-allow-origin'), null)
    const otherGet = await fetch(`${url}/api/v1/models`, { headers: { origin: 'https://evil.example', servicekey: KEY_A, authorization: `Bearer ${PROVIDER_KEY}` } })
    t.equal(otherGet.headers.get('access-control-allow-origin'), null, 'nor any of its answers')

    const odd = await preflight(url, APP, 'x-ok, not a header;name')
    t.equal(odd.headers.get('access-control-allow-headers'), null, 'a header list that is not one is not echoed')
  })

  t.test(`${engine.name}: CORS_ORIGINS=*: any origin, named as *`, async (t) => {
    const h = await startHarness(t, { engine, env: { CORS_ORIGINS: '*' } })
    const r = await preflight(h.gw.url, 'https://anywhere.example')
    t.equal(r.status, 204)
    t.equal(r.headers.get('access-control-allow-origin'), '*')
    t.equal(r.headers.get('vary'), null, 'the same answer for every origin')
  })

  t.test(`${engine.name}: without CORS_ORIGINS: no CORS header, OPTIONS is a 405`, async (t) => {
    const h = await startHarness(t, { engine })
    const r = await preflight(h.gw.url, APP)
    t.equal(r.status, 405)
    t.equal(r.headers.get('access-control-allow-origin'), null)
    const models = await h.fetch('/api/v1/models', { headers: { origin: APP } })
    t.equal(models.headers.get('access-control-allow-origin'), null)
  })
}
