/**
 * Which files `recallgate ingest` uploads: the arguments as given, folders walked in name order (hidden entries and
 * symlink loops left out), kept when their extension is one the gateway extracts, each named by its identity: the
 * path relative to the run's root (see `fileIdentity`).
 */
import { readdir, realpath, stat } from 'node:fs/promises'
import { extname, isAbsolute, join, relative, resolve, sep } from 'node:path'
import type { Bytes } from '../types.js'

/**
 * The extensions the gateway extracts (src/ingest/extract.ts, BY_EXTENSION) and the type each is sent as. Kept in step
 * by hand: the CLI must not import the server's extraction code (pdfjs and friends) just to list names.
 */
export const MIME_TYPES: Readonly<Record<string, string>> = {
  '.txt': 'text/plain',
  '.text': 'text/plain',
  '.log': 'text/plain',
  '.md': 'text/markdown',
  '.markdown': 'text/markdown',
  '.mdown': 'text/markdown',
  '.mkd': 'text/markdown',
  '.html': 'text/html',
  '.htm': 'text/html',
  '.xhtml': 'application/xhtml+xml',
  '.json': 'application/json',
  '.csv': 'text/csv',
  '.tsv': 'text/tab-separated-values',
  '.pdf': 'application/pdf',
}

export interface Candidate {
  path: string
  /** Shown to the user and sent as metadata.path: the file's identity, `fileIdentity(root, path)`. */
  display: string
  size: Bytes
}

/**
 * A file's identity in the knowledge base: its path relative to `root`, with `/` separators and no `.` or `..`
 * segments, so `./handbook/a.md`, `handbook/a.md` and a walk of `handbook` all name the same file, and `a/readme.md`
 * and `b/readme.md` stay two. A run replaces only the stored copies whose `metadata.path` is exactly this string
 * (before, the identity was the folder's or file's base name plus the path inside it, and two `readme.md` given
 * directly were one file). `undefined` when `path` is not inside `root` (a `../` identity would depend on where the
 * root happens to be and could collide with another root's files).
 */
export function fileIdentity(root: string, path: string): string | undefined {
  const rel = relative(resolve(root), resolve(path))
  if (rel === '' || rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) return undefined
  // Only the platform's separator is one: on POSIX a backslash is an ordinary character of a file name.
  return sep === '/' ? rel : rel.split(sep).join('/')
}

/** A path or folder that could not be read, as the run reports it. */
export interface Unreadable {
  ok: false
  file: { display: string }
  reason: string
}

/**
 * The files to upload, in a stable order (arguments as given, folders sorted by name), each named by its identity
 * relative to `root`. Every path must be inside `root` (the caller checks the arguments with `fileIdentity`); a file
 * reached twice (`ingest handbook handbook/a.md`) is taken once.
 */
export async function collect(paths: string[], root: string): Promise<{ files: Candidate[]; skipped: string[]; unreadable: Unreadable[] }> {
  const files: Candidate[] = []
  const skipped: string[] = []
  const unreadable: Unreadable[] = []
  const visited = new Set<string>()
  const seen = new Set<string>()
  const consider = (path: string, display: string, size: Bytes): void => {
    if (seen.has(display)) return
    seen.add(display)
    if (extname(path).toLowerCase() in MIME_TYPES) files.push({ path, display, size })
    else skipped.push(display)
  }
  const name = (path: string): string => fileIdentity(root, path) ?? path
  const walk = async (dir: string, display: string): Promise<void> => {
    // A symlink back up the tree would otherwise recurse forever.
    let entries
    try {
      const real = await realpath(dir)
      if (visited.has(real)) return
      visited.add(real)
      entries = await readdir(dir, { withFileTypes: true })
      entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    } catch (err) {
      // One unreadable folder (EACCES) fails that folder, not the files already found elsewhere.
      unreadable.push({ ok: false, file: { display }, reason: (err as NodeJS.ErrnoException).code ?? String(err) })
      return
    }
    for (const e of entries) {
      if (e.name.startsWith('.')) continue
      const path = join(dir, e.name)
      const shown = name(path)
      const s = e.isSymbolicLink() ? await stat(path).catch(() => undefined) : undefined
      if (e.isDirectory() || s?.isDirectory() === true) await walk(path, shown)
      else if (e.isFile() || s?.isFile() === true) consider(path, shown, s?.size ?? (await stat(path)).size)
      // Sockets, devices and dangling links are not documents: leave them out without comment.
    }
  }
  for (const p of paths) {
    try {
      const s = await stat(p)
      if (s.isDirectory()) await walk(p, name(p))
      else consider(p, name(p), s.size)
    } catch (err) {
      unreadable.push({ ok: false, file: { display: p }, reason: (err as NodeJS.ErrnoException).code ?? String(err) })
    }
  }
  return { files, skipped, unreadable }
}
