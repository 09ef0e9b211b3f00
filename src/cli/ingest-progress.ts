/** What `recallgate ingest` shows while it runs: a redrawn bar on a terminal, one plain line per file otherwise. */
import type { Bytes } from '../types.js'
import type { Outcome } from './ingest-upload.js'

export interface Progress {
  /** A line about one file; on a terminal it is printed above the bar. */
  note(line: string): void
  done(o: Outcome): void
  finish(): void
}

export const plural = (n: number, word: string): string => (n === 1 ? word : `${word}s`)

export function formatBytes(n: Bytes): string {
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`
  return `${(n / 1024 ** 3).toFixed(2)} GiB`
}

/** A redrawn bar when stdout is a terminal; otherwise one plain line per file, for logs and pipes. */
export function createProgress(out: NodeJS.WritableStream, total: number): Progress {
  const tty = out as NodeJS.WritableStream & { isTTY?: boolean; columns?: number }
  let count = 0
  let bytes = 0
  const line = (o: Outcome): string =>
    o.ok
      ? o.state === 'unchanged'
        ? `same  ${o.file.display}  (already stored, skipped)`
        : `ok    ${o.file.display}  (${formatBytes(o.bytes)}, ${o.chunks} ${plural(o.chunks, 'chunk')}${o.state === 'replaced' ? ', replaced the older copy' : ''})`
      : `FAIL  ${o.file.display}  ${o.reason}`
  if (tty.isTTY !== true) {
    return { note: (l) => out.write(`${l}\n`), done: (o) => out.write(`${line(o)}\n`), finish: () => {} }
  }
  const CLEAR = '\r\x1b[2K'
  let last = ''
  const draw = (): void => {
    const columns = Math.max(40, tty.columns ?? 80)
    const width = Math.min(30, columns - 30)
    const filled = total === 0 ? width : Math.round((count / total) * width)
    const head = `[${'█'.repeat(filled)}${'░'.repeat(width - filled)}] ${count}/${total}  ${formatBytes(bytes)}  `
    out.write(`${CLEAR}${head}${last.slice(-(columns - head.length - 1))}`)
  }
  draw()
  return {
    note(l) {
      out.write(`${CLEAR}${l}\n`)
      draw()
    },
    done(o) {
      count++
      if (o.ok) bytes += o.bytes
      else out.write(`${CLEAR}${line(o)}\n`)
      last = o.file.display
      draw()
    },
    finish: () => out.write(CLEAR),
  }
}
