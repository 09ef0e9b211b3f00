/**
 * `recallgate ingest` run again on the same folder against a real gateway: unchanged files are skipped, a changed
 * file replaces its older copy, and search hits and `_metadata.rag.sources` carry each file's metadata (its path).
 */
import t from 'tap'
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs'
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
    t.equal(await run([dir, '--url', h.gw.url, '--key', KEY_A], io), 0, io.err())
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
