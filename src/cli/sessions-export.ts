/**
 * `recallgate sessions export <id>`: fetch one session from a running gateway (GET /api/v1/sessions/{id}) and write
 * its JSON to stdout or a file.
 *
 * The body is streamed as the gateway sent it, not parsed and re-serialized, so a session of any length exports in
 * constant memory. A file is written next to its destination and renamed into place once complete, so an
 * interrupted export never leaves a truncated file under the requested name.
 */
import { once } from 'node:events'
import { createWriteStream } from 'node:fs'
import { rename, rm } from 'node:fs/promises'
import { pipeline } from 'node:stream/promises'
import { Agent, fetch, type Response } from 'undici'
import { type CommandIo, gatewayUrl, parseArgs, reportUsage, serviceKey, UsageError } from './args.js'
import { errorReason, networkError, readBounded } from './gateway-response.js'

export const help = `Usage: recallgate sessions export <id> [--url URL] [--key KEY] [--out FILE]

Write one session of the key's tenant as JSON: {id, object, messages: [<OpenAI message> + created_at], created_at,
updated_at}, as GET /api/v1/sessions/{id} returns it.

Options:
  --url URL     gateway base URL (env RECALLGATE_URL; default http://127.0.0.1:8080)
  --key KEY     service key (env RECALLGATE_KEY; prefer the variable, flags show up in ps)
  --out FILE    write to FILE instead of stdout (replaced only once the export is complete)
  -h, --help    show this help

Exit status: 0 written; 1 the gateway refused or could not be reached (e.g. unknown id); 2 usage error.
`

export async function run(argv: string[], io: CommandIo): Promise<number> {
  let url: string, key: string, id: string, out: string | undefined
  try {
    const args = parseArgs(argv, { url: { type: 'string' }, key: { type: 'string' }, out: { type: 'string', short: 'o' } })
    if (args.help) {
      io.stdout.write(help)
      return 0
    }
    const [first, ...rest] = args.positionals
    if (first === undefined || first === '') throw new UsageError('give the id of the session to export')
    if (rest.length > 0) throw new UsageError(`export takes one session id, got ${args.positionals.length}`)
    id = first
    url = gatewayUrl(args.flags.url, io.env)
    key = serviceKey(args.flags.key, io.env)
    out = args.flags.out
  } catch (err) {
    if (err instanceof UsageError) return reportUsage(io, err, help)
    throw err
  }

  const agent = new Agent({ connections: 1 })
  try {
    let res: Response
    try {
      res = await fetch(`${url}/api/v1/sessions/${encodeURIComponent(id)}`, {
        headers: { serviceKey: key, accept: 'application/json' },
        dispatcher: agent,
      })
    } catch (err) {
      io.stderr.write(`error: gateway unreachable at ${url} (${networkError(err).text})\n`)
      return 1
    }
    if (!res.ok || res.body === null) {
      io.stderr.write(`error: session ${JSON.stringify(id)}: ${errorReason(res.status, await readBounded(res))}\n`)
      return 1
    }
    if (out === undefined) await copyToStdout(res.body, io.stdout)
    else await writeFileAtomically(res.body, out)
    return 0
  } finally {
    await agent.close()
  }
}

async function copyToStdout(body: AsyncIterable<Uint8Array>, out: NodeJS.WritableStream): Promise<void> {
  let last = 0
  for await (const chunk of body) {
    if (chunk.byteLength === 0) continue
    last = chunk[chunk.byteLength - 1] ?? last
    if (!out.write(chunk)) await once(out, 'drain')
  }
  // A shell prompt should not start on the JSON's last line.
  if (last !== 0x0a) out.write('\n')
}

async function writeFileAtomically(body: AsyncIterable<Uint8Array>, path: string): Promise<void> {
  const partial = `${path}.partial-${process.pid}`
  try {
    await pipeline(body, createWriteStream(partial))
    await rename(partial, path)
  } catch (err) {
    // The partial file is useless once the copy failed; the copy's error is the one to report.
    await rm(partial, { force: true })
    throw err
  }
}
