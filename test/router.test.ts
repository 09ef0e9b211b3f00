import t from 'tap'
import { Router } from '../src/http/router.js'

const r = new Router<string>()
  .add('GET', '/api/v1/sessions', 'list')
  .add('GET', '/api/v1/sessions/:id', 'get')
  .add('DELETE', '/api/v1/sessions/:id', 'del')
  .add('POST', '/api/v1/files/search', 'search')
  .add('GET', '/api/v1/files/:id', 'file')

t.test('matches templates and decodes params after matching', async (t) => {
  const m = r.find('GET', '/api/v1/sessions/a%2Fb%20c%E2%9C%93')
  t.equal(m.kind, 'match')
  if (m.kind === 'match') {
    t.equal(m.match.handler, 'get')
    t.same(m.match.params, { id: 'a/b c✓' })
  }
})

t.test('405 lists the allowed methods; 404 for unknown paths', async (t) => {
  const m = r.find('PUT', '/api/v1/sessions/x')
  t.same(m, { kind: 'method-not-allowed', allow: ['GET', 'DELETE'], template: '/api/v1/sessions/:id' })
  t.same(r.find('GET', '/api/v1/nope'), { kind: 'not-found' })
  t.same(r.find('GET', '/api/v1/sessions/'), { kind: 'not-found' }, 'an empty id is no id')
  t.same(r.find('GET', '/api/v1/sessions/%E0%A4%A'), { kind: 'bad-encoding', param: 'id', template: '/api/v1/sessions/:id' }, 'malformed escape: said so')
  t.same(r.find('GET', '/api/v1/sessions/%zz'), { kind: 'bad-encoding', param: 'id', template: '/api/v1/sessions/:id' })
})

t.test('static routes win over params registered later', async (t) => {
  const m = r.find('POST', '/api/v1/files/search')
  t.equal(m.kind === 'match' && m.match.handler, 'search')
  const g = r.find('GET', '/api/v1/files/search')
  t.same(g, { kind: 'method-not-allowed', allow: ['POST'], template: '/api/v1/files/search' }, 'GET /files/search is the search route with the wrong method, not a file with id "search"')
})
