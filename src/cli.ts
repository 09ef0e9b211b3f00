#!/usr/bin/env node
/** The `recallgate` bin: hands argv and the process's streams to the dispatcher in cli/main.ts. */
import type { CommandIo } from './cli/args.js'
import { main } from './cli/main.js'

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
