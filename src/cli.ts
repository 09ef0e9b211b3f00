#!/usr/bin/env node
/** The `recallgate` bin: hands argv and the process's streams to the dispatcher in cli/main.ts. */
import type { CommandIo } from './cli/args.js'
import { main } from './cli/main.js'

// `recallgate sessions export … | head`: the reader left, so there is no one to write to and nothing went wrong; end
// quietly, as `cat` does, instead of dying on an unhandled 'error' with a stack trace. Any other stdout failure (a full
// disk under a redirect) is reported.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0)
  process.stderr.write(`recallgate: cannot write the output: ${err.message}\n`)
  process.exit(1)
})

const io: CommandIo = { stdout: process.stdout, stderr: process.stderr, env: process.env }
main(process.argv.slice(2), io).then(
  (code) => {
    if (code >= 0) process.exitCode = code
  },
  (err: unknown) => {
    process.stderr.write(`recallgate: ${String(err)}\n`)
    process.exitCode = 1
  },
)
