/**
 * `recallgate ingest <path…>`: upload files to a running gateway's knowledge base (POST /api/v1/files, multipart),
 * recursing into folders, a few uploads in flight, with a progress bar on a terminal and a summary at the end.
 *
 * This module parses the arguments, runs the workers and writes the summary. Which files: ingest-files.ts; one
 * upload with its retries: ingest-upload.ts; the progress display: ingest-progress.ts; reading the gateway's
 * answers: gateway-response.ts.
 */
import { stat } from 'node:fs/promises'
import { resolve } from 'node:path'
import { Agent } from 'undici'
import type { Ms } from '../types.js'
import { type CommandIo, gatewayUrl, intFlag, parseArgs, reportUsage, serviceKey, UsageError } from './args.js'
import { collect, fileIdentity, MIME_TYPES, type Candidate } from './ingest-files.js'
import { createProgress, formatBytes, plural } from './ingest-progress.js'
import { upload, UPLOAD_HEADERS_TIMEOUT, type Failed, type Outcome, type Uploaded } from './ingest-upload.js'
import { deleteFiles, KeyRefused, listExisting, sha256File, type Existing } from './ingest-existing.js'

// Exported from here before the split; sessions-export.ts and bench.ts still import the response helpers from here.
export { formatBytes, MIME_TYPES }

export const help = `Usage: recallgate ingest <path…> [--root DIR] [--url URL] [--key KEY] [--concurrency N]

Upload files to a running gateway's knowledge base (POST /api/v1/files), recursing into folders.
Supported: .txt .text .log .md .markdown .mdown .mkd .html .htm .xhtml .json .csv .tsv .pdf. Other files
are skipped, and so are hidden entries (.git, .env) inside folders.

A file's identity is its path relative to the root (--root, default the current directory), with / separators
and without ./: from the same root, \`ingest ./handbook\` and \`ingest handbook/refunds.txt\` both name
handbook/refunds.txt, and a/readme.md and b/readme.md are two files. Paths outside the root are refused. Each
upload carries the metadata {"path": "<identity>", "sha256": "<content hash>"}. Running it again is safe: a file
whose path and content are already stored is skipped; a changed file replaces the stored copies of that exact
path and no other.

Options:
  --root DIR         the folder paths are taken relative to (default: the current directory)
  --url URL          gateway base URL (env RECALLGATE_URL; default http://127.0.0.1:8080)
  --key KEY          service key (env RECALLGATE_KEY; prefer the variable, flags show up in ps)
  --concurrency N    uploads in flight, 1-32 (default 4)
  -h, --help         show this help

Exit status: 0 all files uploaded; 1 a file failed, or nothing to upload; 2 usage error.
`

/** What a test (or another caller) may replace: waiting and the clock, so retries need no real sleeping. */
export interface IngestIo extends CommandIo {
  sleep?: (ms: Ms) => Promise<void>
  now?: () => Ms
}

export async function run(argv: string[], io: IngestIo): Promise<number> {
  let url: string, key: string, concurrency: number, paths: string[], root: string
  try {
    const args = parseArgs(argv, { root: { type: 'string' }, url: { type: 'string' }, key: { type: 'string' }, concurrency: { type: 'string' } })
    if (args.help) {
      io.stdout.write(help)
      return 0
    }
    if (args.positionals.length === 0) throw new UsageError('give at least one file or folder to upload')
    url = gatewayUrl(args.flags.url, io.env)
    key = serviceKey(args.flags.key, io.env)
    concurrency = intFlag('concurrency', args.flags.concurrency, { min: 1, max: 32, fallback: 4 })
    paths = args.positionals
    root = await rootFolder(args.flags.root)
    for (const p of paths) {
      // The root itself (`ingest .`) is a folder to walk; anything else must have an identity under it.
      if (resolve(p) !== root && fileIdentity(root, p) === undefined)
        throw new UsageError(`${p} is outside the root ${root}: run ingest from a folder that contains it, or pass --root`)
    }
  } catch (err) {
    if (err instanceof UsageError) return reportUsage(io, err, help)
    throw err
  }

  const now = io.now ?? (() => performance.now())
  const started = now()
  const found = await collect(paths, root)
  const progress = createProgress(io.stdout, found.files.length)
  for (const s of found.skipped) progress.note(`skip  ${s}  unsupported extension`)
  for (const f of found.unreadable) progress.note(`FAIL  ${f.file.display}  ${f.reason}`)
  if (found.files.length === 0 && found.unreadable.length === 0) {
    io.stderr.write(`No supported files found in ${paths.join(', ')} (${Object.keys(MIME_TYPES).join(' ')}).\n`)
    return 1
  }

  const endpoint = `${url}/api/v1/files`
  const agent = new Agent({ connections: concurrency, headersTimeout: UPLOAD_HEADERS_TIMEOUT })
  const sleep = io.sleep ?? ((ms: Ms) => new Promise<void>((resolve) => setTimeout(resolve, ms)))
  const outcomes: Outcome[] = []
  let next = 0
  let stopped: string | undefined
  // Running again on the same folder: unchanged files are skipped, changed ones replace their older copies. Only a
  // stored record whose path is exactly the file's identity is its older copy (ingest-files.ts, fileIdentity).
  let existing: Existing = new Map()
  try {
    existing = await listExisting(url, key, agent)
  } catch (err) {
    if (err instanceof KeyRefused) stopped = err.message
    else progress.note(`note  could not list the files already stored (${(err as Error).message}); uploading every file`)
  }
  const worker = async (): Promise<void> => {
    while (stopped === undefined && next < found.files.length) {
      const file = found.files[next++] as Candidate
      const onWait = (s: number): void => progress.note(`wait  ${file.display}  rate limited, retrying in ${s} s`)
      // Unreadable now: the upload reports why.
      const sha256 = await sha256File(file.path).catch(() => undefined)
      const prior = existing.get(file.display) ?? []
      let outcome: Outcome
      if (sha256 !== undefined && prior.some((p) => p.sha256 === sha256)) {
        outcome = { ok: true, file, bytes: 0, chunks: 0, state: 'unchanged' }
      } else {
        outcome = await upload(file, { endpoint, key, agent, sleep, onWait, sha256 })
        if (outcome.ok && prior.length > 0) {
          const left = await deleteFiles(url, key, agent, prior.map((p) => p.id))
          outcome = left.length === 0 ? { ...outcome, state: 'replaced' } : { ok: false, file, reason: `stored, but older copies ${left.join(', ')} could not be deleted` }
        }
      }
      outcomes.push(outcome)
      if (!outcome.ok && outcome.fatal === true && stopped === undefined) stopped = outcome.reason
      progress.done(outcome)
    }
  }
  try {
    await Promise.all(Array.from({ length: Math.min(concurrency, found.files.length) }, worker))
  } finally {
    await agent.close()
  }
  progress.finish()

  const unchanged = outcomes.filter((o) => o.ok && o.state === 'unchanged').length
  const replaced = outcomes.filter((o) => o.ok && o.state === 'replaced').length
  const ok = outcomes.filter((o): o is Uploaded => o.ok && o.state !== 'unchanged')
  const failed = [...found.unreadable, ...outcomes.filter((o): o is Failed => !o.ok)]
  const notAttempted = found.files.length - outcomes.length
  const bytes = ok.reduce((n, o) => n + o.bytes, 0)
  const chunks = ok.reduce((n, o) => n + o.chunks, 0)
  const seconds = ((now() - started) / 1000).toFixed(1)
  const totals = `${formatBytes(bytes)}, ${chunks} ${plural(chunks, 'chunk')}`
  let summary = `Uploaded ${ok.length} ${plural(ok.length, 'file')} (${totals}) in ${seconds} s`
  if (replaced > 0) summary += ` (${replaced} replacing older copies)`
  summary += `; ${unchanged} unchanged; ${failed.length} failed; ${found.skipped.length} skipped.\n`
  if (stopped !== undefined)
    summary += `Stopped early: ${stopped}; ${notAttempted} ${plural(notAttempted, 'file')} not attempted.\n`
  if (failed.length > 0) summary += `Failed:\n${failed.map((f) => `  ${f.file.display}: ${f.reason}\n`).join('')}`
  if (found.skipped.length > 0) {
    const shown = found.skipped.slice(0, 20)
    const more = found.skipped.length - shown.length
    summary += `Skipped (unsupported extension):\n${shown.map((s) => `  ${s}\n`).join('')}`
    if (more > 0) summary += `  … and ${more} more\n`
  }
  io.stdout.write(summary)
  return failed.length > 0 || notAttempted > 0 ? 1 : 0
}

/** `--root` (default: the current directory) as an absolute path; it must be an existing folder. */
async function rootFolder(flag: string | undefined): Promise<string> {
  const root = resolve(flag ?? '.')
  const s = await stat(root).catch(() => undefined)
  if (s?.isDirectory() !== true) throw new UsageError(`--root must be an existing folder, got "${flag ?? root}"`)
  return root
}
