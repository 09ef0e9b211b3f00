/**
 * `recallgate ingest` run again on the same folder against a real gateway: unchanged files are skipped, a changed
 * file replaces its older copy, and search hits and `_metadata.rag.sources` carry each file's metadata (its path).
 * A file's identity is its whole path relative to the root: same-named files in different folders stay two files,
 * and a file named on its own after its folder was ingested is the same file, not a second copy.
 */
import t, { type Test } from 'tap'
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { run } from '../src/cli/ingest.js'
import { capturedIo } from './helpers/captured-io.js'
import { KEY_A, startHarness } from './helpers/harness.js'

t.test('ingest twice: nothing duplicated; a changed file is replaced; hits say which file they came from', async (t) => {
  const h = await startHarness(t)
  const root = mkdtempSync(join(tmpdir(), 'recallgate-ingest-again-'))
  const dir = join(root, 'docs')
  mkdirSync(join(dir, 'sub'), { recursive: true })
  writeFileSync(join(dir, 'a.md'), '# Alpha\n\nThe zorblat engine runs on Tuesdays.')
  writeFileSync(join(dir, 'sub', 'a.md'), '# Alpha again\n\nThe quindle valve is blue.')
  const ingest = async (): Promise<string> => {
    const io = capturedIo()
    t.equal(await run([dir, '--root', root, '--url', h.gw.url, '--key', KEY_A], io), 0, io.err())
    return io.out()
  }
  const files = async () =>
    ((await (await h.fetch('/api/v1/files', { provider: null })).json()) as { data: Array<{ id: string; metadata: { path: string } }> }).data

  t.match(await ingest(), /Uploaded 2 files .*; 0 unchanged/)
  const first = await files()
  t.equal(first.length, 2)
  t.match(await ingest(), /Uploaded 0 files .*; 2 unchanged/, 'the second run uploads nothing')
  t.same((await files()).map((f) => f.id).sort(), first.map((f) => f.id).sort(), 'same files, no copies')

  writeFileSync(join(dir, 'a.md'), '# Alpha\n\nThe zorblat engine now runs on Fridays.')
  t.match(await ingest(), /Uploaded 1 file .*\(1 replacing older copies\); 1 unchanged/)
  const after = await files()
  t.equal(after.length, 2, 'the changed file replaced its copy')
  t.same(after.map((f) => f.metadata.path).sort(), ['docs/a.md', 'docs/sub/a.md'])

  const r = await h.fetch('/api/v1/files/search', { method: 'POST', provider: null, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: 'zorblat engine' }) })
  const hits = ((await r.json()) as { data: Array<{ filename: string; text: string; metadata: { path: string } }> }).data
  t.match(hits[0], { filename: 'a.md', metadata: { path: 'docs/a.md' } }, 'two files named a.md are told apart by their metadata')
  t.match(hits[0]?.text, /Fridays/)
  t.notOk(hits.some((x) => /Tuesdays/.test(x.text)), 'the old content is gone')

  const chat = await h.client().chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'When does the zorblat engine run?' }] })
  const sources = (chat as unknown as { _metadata: { rag: { sources: Array<{ metadata: { path: string } }> } } })._metadata.rag.sources
  t.match(sources[0], { metadata: { path: 'docs/a.md' } }, '_metadata.rag.sources carry the metadata')
})

type Stored = { id: string; metadata: { path: string } }

async function setup(t: Test) {
  const h = await startHarness(t)
  const root = mkdtempSync(join(tmpdir(), 'recallgate-ingest-identity-'))
  t.teardown(() => rmSync(root, { recursive: true, force: true }))
  const ingest = async (...paths: string[]): Promise<string> => {
    const io = capturedIo()
    // Relative paths, as a user types them: they are resolved against --root's folder, the test's stand-in for cwd.
    const args = paths.map((p) => join(root, p))
    t.equal(await run([...args, '--root', root, '--url', h.gw.url, '--key', KEY_A], io), 0, io.err())
    return io.out()
  }
  const files = async (): Promise<Stored[]> => ((await (await h.fetch('/api/v1/files', { provider: null })).json()) as { data: Stored[] }).data
  const search = async (query: string): Promise<Array<{ text: string; metadata: { path: string } }>> => {
    const r = await h.fetch('/api/v1/files/search', { method: 'POST', provider: null, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) })
    return ((await r.json()) as { data: Array<{ text: string; metadata: { path: string } }> }).data
  }
  return { root, ingest, files, search }
}

t.test('same-named files in different folders: changing one never replaces the other', async (t) => {
  const { root, ingest, files, search } = await setup(t)
  mkdirSync(join(root, 'a'))
  mkdirSync(join(root, 'b'))
  writeFileSync(join(root, 'a', 'readme.md'), '# A\n\nThe zorblat engine runs on Tuesdays.')
  writeFileSync(join(root, 'b', 'readme.md'), '# B\n\nThe quindle valve is painted blue.')

  t.match(await ingest('a/readme.md', 'b/readme.md'), /Uploaded 2 files /)
  t.same((await files()).map((f) => f.metadata.path).sort(), ['a/readme.md', 'b/readme.md'], 'each keeps its folder in its path')

  writeFileSync(join(root, 'a', 'readme.md'), '# A\n\nThe zorblat engine now runs on Fridays.')
  const out = await ingest('a/readme.md')
  t.match(out, /^ok {4}a\/readme\.md .*replaced the older copy/m)
  t.same((await files()).map((f) => f.metadata.path).sort(), ['a/readme.md', 'b/readme.md'], 'b/readme.md is still stored')
  const hits = await search('quindle valve')
  t.match(hits[0], { metadata: { path: 'b/readme.md' } }, "b/readme.md's content is still found")
  t.match(hits[0]?.text, /painted blue/)
  t.notOk((await search('zorblat engine')).some((x) => /Tuesdays/.test(x.text)), "a/readme.md's old content is gone")
})

t.test('a folder, then one of its files on its own (any spelling): the same file, not a second copy', async (t) => {
  const { root, ingest, files } = await setup(t)
  mkdirSync(join(root, 'handbook'))
  writeFileSync(join(root, 'handbook', 'refunds.txt'), 'Refunds are paid within 14 days.')
  writeFileSync(join(root, 'handbook', 'shipping.txt'), 'Parcels ship on weekdays.')

  t.match(await ingest('./handbook'), /Uploaded 2 files /)
  const first = await files()
  t.same(first.map((f) => f.metadata.path).sort(), ['handbook/refunds.txt', 'handbook/shipping.txt'])

  t.match(await ingest('handbook/refunds.txt'), /^same  handbook\/refunds\.txt  \(already stored, skipped\)$/m)
  t.match(await ingest('./handbook//refunds.txt'), /Uploaded 0 files .*; 1 unchanged/, 'a ./ or a doubled slash is the same path')
  t.same((await files()).map((f) => f.id).sort(), first.map((f) => f.id).sort(), 'no second copy')

  writeFileSync(join(root, 'handbook', 'refunds.txt'), 'Refunds are paid within 30 days.')
  t.match(await ingest('handbook/refunds.txt'), /\(1 replacing older copies\)/)
  t.match(await ingest('handbook'), /Uploaded 0 files .*; 2 unchanged/, 'the folder sees the single-file upload as its own file')
  const after = await files()
  t.same(after.map((f) => f.metadata.path).sort(), ['handbook/refunds.txt', 'handbook/shipping.txt'], 'still one copy each')
})

t.test('a refused key stops the run at the listing, before any upload (a revoked one says so)', async (t) => {
  const h = await startHarness(t)
  const root = mkdtempSync(join(tmpdir(), 'recallgate-ingest-401-'))
  t.teardown(() => rmSync(root, { recursive: true, force: true }))
  for (const name of ['a.txt', 'b.txt', 'c.txt']) writeFileSync(join(root, name), `file ${name}`)
  const io = capturedIo()
  t.equal(await run([root, '--root', root, '--url', h.gw.url, '--key', 'rg_not-a-key-at-all'], io), 1)
  t.match(io.out(), /Stopped early: 401 invalid_service_key: Invalid service key; 3 files not attempted\./)
  t.match(io.out(), /^Uploaded 0 files/m)
  const { key, record } = await h.gw.keys.create('pro')
  await h.gw.keys.revoke(record.id)
  const revoked = capturedIo()
  t.equal(await run([root, '--root', root, '--url', h.gw.url, '--key', key], revoked), 1)
  t.match(revoked.out(), /Stopped early: 401 key_revoked: This service key was revoked: ask the operator for its replacement; 3 files not attempted\./)
  t.equal(h.logs().split('\n').filter((l) => l.includes('"route":"/api/v1/files"') && l.includes('"method":"POST"')).length, 0, 'no upload was sent')
})
