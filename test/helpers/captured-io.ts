/** A command's io (src/cli/args.ts CommandIo) whose stdout and stderr are captured as text for assertions. */
import { PassThrough } from 'node:stream'

export function capturedIo(env: Record<string, string | undefined> = {}) {
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  let out = ''
  let err = ''
  stdout.on('data', (b: Buffer) => (out += b.toString('utf8')))
  stderr.on('data', (b: Buffer) => (err += b.toString('utf8')))
  return { stdout, stderr, env, out: () => out, err: () => err }
}
