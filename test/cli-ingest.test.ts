import busboy from 'busboy'
import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { help as ingestHelp, run as ingest } from '../src/cli/ingest.js'
import { run as exportSession } from '../src/cli/sessions-export.js'
import { capturedIo } from './helpers/captured-io.js'

const KEY = 'rg_test_service_key_123-Vq8Zr3Lw5Ym2'

interface Upload {
  filename: string
  mimeType: string
  content: string
  metadata: unknown
  serviceKey: string | undefined
}
type Reply = { status: number; body: unknown; headers?: Record<string, string> }

/** A stand-in gateway: parses multipart uploads with busboy and answers like the contract (201 file record). */
async function fakeGateway(t: Test, decide: (u: Upload, n: number) => Reply = () => ({ status: 201, body: null })) {
  const uploads: Upload[] = []
  let inFlight = 0
  let maxInFlight = 0
  const routes: Record<string, (req: IncomingMessage, res: ServerResponse) => void> = {}
  const server = createServer((req, res) => {
    const send = (r: Reply): void => {
      res.writeHead(r.status, { 'content-type': 'application/json', ...r.headers })
      res.end(JSON.stringify(r.body))
    }
    const custom = routes[`${req.method} ${req.url}`]
    if (custom) return custom(req, res)
    // Nothing stored yet: the command lists the files first, to skip unchanged ones (test/cli-ingest-again.e2e.test.ts).
    if (req.method === 'GET' && req.url?.split('?')[0] === '/api/v1/files') return send({ status: 200, body: { object: 'list', data: [] } })
    if (req.method !== 'POST' || req.url !== '/api/v1/files') return send({ status: 404, body: { error: { message: 'nope' } } })
    inFlight++
    maxInFlight = Math.max(maxInFlight, inFlight)
    const bb = busboy({ headers: req.headers })
    const serviceKey = req.headers.servicekey
    const upload: Upload = {
      filename: '',
      mimeType: '',
      content: '',
      metadata: undefined,
      serviceKey: typeof serviceKey === 'string' ? serviceKey : undefined,
    }
    bb.on('field', (name, value) => {
      if (name === 'metadata') upload.metadata = JSON.parse(value)
    })
    bb.on('file', (_name, stream, info) => {
      upload.filename = info.filename ?? ''
      upload.mimeType = info.mimeType
      stream.on('data', (b: Buffer) => (upload.content += b.toString('utf8')))
    })
    bb.on('close', () => {
      inFlight--
      uploads.push(upload)
      const reply = decide(upload, uploads.length)
      if (reply.status === 201 && reply.body === null) {
        reply.body = {
          id: `file-${uploads.length}`,
          object: 'file',
          filename: upload.filename,
          bytes: Buffer.byteLength(upload.content),
          chunks: 3,
          status: 'processed',
          created_at: 1700000000,
          metadata: upload.metadata,
        }
      }
      send(reply)
    })
    req.pipe(bb)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return { url, uploads, routes, maxInFlight: () => maxInFlight }
}

/** A captured io that records the waits it is asked for instead of sleeping; `tty` makes stdout a 100-column terminal. */
function io(env: Record<string, string | undefined> = {}, opts: { tty?: boolean; sleeps?: number[] } = {}) {
  const captured = capturedIo(env)
  if (opts.tty === true) Object.assign(captured.stdout, { isTTY: true, columns: 100 })
  return {
    ...captured,
    sleep: async (ms: number) => {
      opts.sleeps?.push(ms)
    },
  }
}

async function folder(t: Test, files: Record<string, string>): Promise<string> {
  const root = join(t.testdir(), 'docs')
  for (const [name, content] of Object.entries(files)) {
    await mkdir(join(root, name, '..'), { recursive: true })
    await writeFile(join(root, name), content)
  }
  return root
}

t.test('uploads a folder: supported files go up, others are skipped, a 415 is reported and fails the run', async (t) => {
  const gw = await fakeGateway(t, (u) =>
    u.filename.endsWith('.csv')
      ? { status: 415, body: { error: { message: 'CSV is disabled here', type: 'invalid_request_error', param: 'file', code: 'unsupported_media_type' } } }
      : { status: 201, body: null },
  )
  const root = await folder(t, { 'guide/a.md': '# Guide\n\nHello there.', 'b.csv': 'x,y\n1,2\n', 'c.xyz': 'binary-ish' })
  const cli = io({ RECALLGATE_URL: gw.url, RECALLGATE_KEY: KEY })

  const code = await ingest(['--root', t.testdirName, root], cli)

  t.equal(code, 1, 'exit 1 because one file failed')
  t.same(gw.uploads.map((u) => u.filename).sort(), ['a.md', 'b.csv'], 'the .xyz file never reached the server')
  const md = gw.uploads.find((u) => u.filename === 'a.md')
  t.match(md, { content: '# Guide\n\nHello there.', mimeType: 'text/markdown', metadata: { path: 'docs/guide/a.md' }, serviceKey: KEY })
  const out = cli.out()
  t.match(out, /^ok {4}docs\/guide\/a\.md {2}\(21 B, 3 chunks\)$/m)
  t.match(out, /^skip  docs\/c\.xyz  unsupported extension$/m)
  t.match(out, /^Uploaded 1 file \(21 B, 3 chunks\) in \d+\.\d s; 0 unchanged; 1 failed; 1 skipped\.$/m)
  t.match(out, /^Failed:\n {2}docs\/b\.csv: 415 unsupported_media_type: CSV is disabled here$/m)
  t.match(out, /^Skipped \(unsupported extension\):\n {2}docs\/c\.xyz$/m)
  t.notOk(out.includes('\x1b'), 'no terminal control codes when stdout is not a TTY')
  t.equal(cli.err(), '')
})

t.test('files already stored are found over every page of the listing, and left alone', async (t) => {
  const gw = await fakeGateway(t)
  const root = await folder(t, { 'a.md': 'alpha text', 'b.md': 'beta text', 'c.md': 'gamma text' })
  const sha = (text: string): string => createHash('sha256').update(text).digest('hex')
  const page = (body: unknown) => (_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify(body))
  }
  gw.routes['GET /api/v1/files?order=asc'] = page({ object: 'list', data: [{ id: 'file-1', metadata: { path: 'docs/a.md', sha256: sha('alpha text') } }], first_id: 'file-1', last_id: 'file-1', has_more: true })
  gw.routes['GET /api/v1/files?order=asc&after=file-1'] = page({ object: 'list', data: [{ id: 'file-2', metadata: { path: 'docs/b.md', sha256: sha('beta text') } }], first_id: 'file-2', last_id: 'file-2', has_more: false })
  const cli = io({ RECALLGATE_URL: gw.url, RECALLGATE_KEY: KEY })
  t.equal(await ingest(['--root', t.testdirName, root], cli), 0)
  t.same(gw.uploads.map((u) => u.filename), ['c.md'], 'the files of both pages were not sent again')
  t.match(cli.out(), /; 2 unchanged; 0 failed; 0 skipped\.$/m)
})

t.test('flags override the environment; concurrency is respected; hidden entries are left out', async (t) => {
  const gw = await fakeGateway(t)
  const files: Record<string, string> = { '.git/notes.md': 'secret', '.env.md': 'secret', 'n/x.html': '<p>x</p>' }
  for (let i = 0; i < 5; i++) files[`f${i}.txt`] = `file ${i}`
  const big = 'lorem ipsum dolor sit amet\n'.repeat(120_000) // ~3 MiB, streamed from disk
  files['f5.txt'] = big
  const root = await folder(t, files)
  const single = join(root, '.env.md')
  const cli = io({ RECALLGATE_URL: 'http://127.0.0.1:1', RECALLGATE_KEY: 'wrong-key' })

  const code = await ingest(['--root', t.testdirName, root, single, `--url=${gw.url}/`, '--key', KEY, '--concurrency', '2'], cli)

  t.equal(code, 0)
  t.same(gw.uploads.map((u) => u.metadata).map((m) => (m as { path: string }).path).sort(), [
    'docs/.env.md', // named explicitly, so uploaded even though hidden
    'docs/f0.txt',
    'docs/f1.txt',
    'docs/f2.txt',
    'docs/f3.txt',
    'docs/f4.txt',
    'docs/f5.txt',
    'docs/n/x.html',
  ])
  t.ok(gw.uploads.every((u) => u.serviceKey === KEY))
  t.equal(gw.uploads.find((u) => u.filename === 'f5.txt')?.content, big, 'a large file arrives intact')
  t.ok(gw.maxInFlight() <= 2, `at most 2 uploads in flight (saw ${gw.maxInFlight()})`)
  t.match(cli.out(), /^Uploaded 8 files \(3\.1 MiB, 24 chunks\) in [\d.]+ s; 0 unchanged; 0 failed; 0 skipped\.$/m)
})

t.test('a 429 is waited out with Retry-After (injected sleep) and retried', async (t) => {
  const gw = await fakeGateway(t, (_u, n) =>
    n === 1
      ? { status: 429, body: { error: { message: 'Rate limit exceeded', code: 'rate_limit_exceeded' } }, headers: { 'retry-after': '7' } }
      : { status: 201, body: null },
  )
  const root = await folder(t, { 'a.txt': 'alpha' })
  const sleeps: number[] = []
  const cli = io({ RECALLGATE_KEY: KEY }, { sleeps })
  const code = await ingest(['--root', t.testdirName, root, '--url', gw.url], cli)
  t.equal(code, 0)
  t.same(sleeps, [7000])
  t.equal(gw.uploads.length, 2, 'the same file was sent twice')
  t.match(cli.out(), /^wait  docs\/a\.txt  rate limited, retrying in 7 s$/m)
})

t.test('an unreachable gateway stops the run instead of failing file after file', async (t) => {
  const closed = createServer()
  closed.listen(0, '127.0.0.1')
  await once(closed, 'listening')
  const port = (closed.address() as AddressInfo).port
  await new Promise<void>((resolve) => closed.close(() => resolve()))
  const root = await folder(t, { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c', 'd.txt': 'd' })
  const cli = io({ RECALLGATE_KEY: KEY })
  const code = await ingest(['--root', t.testdirName, root, '--url', `http://127.0.0.1:${port}`, '--concurrency', '1'], cli)
  t.equal(code, 1)
  t.match(cli.out(), new RegExp(`Stopped early: gateway unreachable at http://127.0.0.1:${port} \\(ECONNREFUSED\\); 3 files not attempted\\.`))
})

t.test('a rejected service key stops the run', async (t) => {
  const gw = await fakeGateway(t, () => ({ status: 401, body: { error: { message: 'Invalid service key', code: 'invalid_service_key' } } }))
  const root = await folder(t, { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' })
  const cli = io({ RECALLGATE_KEY: 'nope-nope', RECALLGATE_URL: gw.url })
  t.equal(await ingest(['--root', t.testdirName, root, '--concurrency', '1'], cli), 1)
  t.equal(gw.uploads.length, 1)
  t.match(cli.out(), /Stopped early: 401 invalid_service_key: Invalid service key; 2 files not attempted\./)
})

t.test('missing paths fail; nothing supported at all is an error too', async (t) => {
  const gw = await fakeGateway(t)
  const root = await folder(t, { 'a.txt': 'a', 'img.png': 'png' })
  const cli = io({ RECALLGATE_KEY: KEY, RECALLGATE_URL: gw.url })
  t.equal(await ingest(['--root', t.testdirName, root, join(root, 'missing.md')], cli), 1)
  t.equal(gw.uploads.length, 1)
  t.match(cli.out(), /missing\.md: ENOENT/)

  const only = io({ RECALLGATE_KEY: KEY, RECALLGATE_URL: gw.url })
  t.equal(await ingest(['--root', t.testdirName, join(root, 'img.png')], only), 1)
  t.match(only.err(), /^No supported files found/)
})

t.test('on a terminal, a progress bar is redrawn in place', async (t) => {
  const gw = await fakeGateway(t)
  const root = await folder(t, { 'a.txt': 'a', 'b.txt': 'b' })
  const cli = io({ RECALLGATE_KEY: KEY, RECALLGATE_URL: gw.url }, { tty: true })
  t.equal(await ingest(['--root', t.testdirName, root], cli), 0)
  const out = cli.out()
  t.match(out, /\r\x1b\[2K\[░+\] 0\/2/)
  // Both uploads run at once, so either may finish last.
  t.match(out, /\r\x1b\[2K\[█+\] 2\/2  2 B  docs\/[ab]\.txt/)
  t.match(out, /\r\x1b\[2KUploaded 2 files/, 'the bar is cleared before the summary')
})

t.test('usage: --help, missing key, bad flags', async (t) => {
  const help = io()
  t.equal(await ingest(['--help'], help), 0)
  t.equal(help.out(), ingestHelp)
  t.equal(await ingest(['x', '--nope', '-h'], io()), 0, '--help wins over other problems')

  const noKey = io()
  t.equal(await ingest(['.'], noKey), 2)
  t.match(noKey.err(), /^error: a service key is required: set RECALLGATE_KEY or pass --key\n\nUsage: recallgate ingest/)

  const cases: [string[], RegExp][] = [
    [[], /give at least one file or folder/],
    [['.', '--bogus'], /Unknown option '--bogus'/],
    [['.', '--concurrency', '0'], /--concurrency must be between 1 and 32, got 0/],
    [['.', '--concurrency=lots'], /--concurrency must be a whole number/],
    [['.', '--url', 'ftp://x'], /--url must be an http\(s\) URL/],
    [['.', '--url'], /argument missing/],
    [['..', '--root', '.'], /^error: \.\. is outside the root .*: run ingest from a folder that contains it, or pass --root/],
    [['.', '--root', 'no-such-folder-here'], /--root must be an existing folder, got "no-such-folder-here"/],
  ]
  for (const [argv, message] of cases) {
    const c = io({ RECALLGATE_KEY: KEY })
    t.equal(await ingest(argv, c), 2, argv.join(' '))
    t.match(c.err(), message)
  }
})

t.test('sessions export writes the JSON for an url-encoded id, to a file or stdout', async (t) => {
  const gw = await fakeGateway(t)
  const session = { id: 'team/a b', object: 'session', messages: [{ role: 'user', content: 'hi', created_at: 1 }], created_at: 1, updated_at: 2 }
  gw.routes['GET /api/v1/sessions/team%2Fa%20b'] = (req, res) => {
    if (req.headers.servicekey !== KEY) return res.writeHead(401).end()
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(session))
  }
  const dir = t.testdir()
  const outFile = join(dir, 'session.json')
  const env = { RECALLGATE_KEY: KEY, RECALLGATE_URL: gw.url }

  const toFile = io(env)
  t.equal(await exportSession(['team/a b', '--out', outFile], toFile), 0)
  t.same(JSON.parse(await readFile(outFile, 'utf8')), session)
  t.same(await readdir(dir), ['session.json'], 'no partial file left behind')

  const toStdout = io(env)
  t.equal(await exportSession(['team/a b'], toStdout), 0)
  t.equal(toStdout.out(), `${JSON.stringify(session)}\n`)

  const missing = io(env)
  t.equal(await exportSession(['nope', '-o', join(dir, 'nope.json')], missing), 1)
  t.match(missing.err(), /^error: session "nope": 404: nope\n$/)
  t.same(await readdir(dir), ['session.json'], 'a failed export creates no file')

  const usage = io(env)
  t.equal(await exportSession([], usage), 2)
  t.match(usage.err(), /give the id of the session to export/)
})
