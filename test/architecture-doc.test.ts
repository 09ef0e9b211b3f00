/**
 * docs/architecture.md stays the map of the code, as errors.test.ts keeps the README's error table: every module the
 * folder map names exists and every module in src/ is named there; every function or method a link names is
 * declared in the module it links to; every repository path the page mentions exists. A module moved, renamed or
 * added fails here until the page says so.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const doc = readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8')

/** Every file under src/, as `src/a/b.ts`. */
function sourceFiles(dir = join(ROOT, 'src')): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : [relative(ROOT, join(dir, e.name)).split('\\').join('/')],
  )
}

/** A cell's text without anything in parentheses: what is left names the modules, the rest describes them. */
function withoutParentheses(cell: string): string {
  let out = ''
  let depth = 0
  for (const c of cell) {
    if (c === '(') depth++
    else if (c === ')') depth = Math.max(0, depth - 1)
    else if (depth === 0) out += c
  }
  return out
}

const codeSpans = (text: string): string[] => [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1] as string)

/** The folder map: `| \`src/folder/\` | job | modules |` rows → folder → the module files they name. */
function folderMap(): Map<string, string[]> {
  const map = new Map<string, string[]>()
  for (const line of doc.split('\n')) {
    const cells = line.split(' | ')
    const folder = /^\| `(src\/(?:[\w-]+\/)*)` $/.exec(`${cells[0]} `)?.[1]
    if (folder === undefined || cells.length < 3) continue
    const modules = codeSpans(withoutParentheses(cells.slice(2).join(' | ')))
    map.set(
      folder,
      modules.map((m) => `${folder}${/\.\w+$/.test(m) ? m : `${m}.ts`}`),
    )
  }
  return map
}

t.test('every module the folder map names exists, and every module in src/ is in the map', async (t) => {
  const map = folderMap()
  t.ok(map.size >= 20, `the map has a row per folder (${map.size} rows)`)
  const named = new Set<string>()
  for (const [folder, files] of map) {
    t.ok(existsSync(join(ROOT, folder)), `${folder} exists`)
    for (const f of files) {
      t.ok(existsSync(join(ROOT, f)), `${f} (named in the row of ${folder}) exists`)
      named.add(f)
    }
  }
  for (const f of sourceFiles()) t.ok(named.has(f), `${f} is in docs/architecture.md's folder map`)
})

/** `[\`name\`](../src/x.ts)` links: `Class.method`, or a function, class or constant declared in that module. */
const links = [...doc.matchAll(/\[`([\w.]+)`\]\(\.\.\/(src\/[\w/.-]+)\)/g)].map((m) => ({ name: m[1] as string, path: m[2] as string }))

function declares(source: string, name: string): boolean {
  const [owner, member] = name.split('.') as [string, string | undefined]
  const declared = new RegExp(`(?:function\\*?|class|const|let|interface|type)\\s+${owner}\\b`).test(source)
  if (member === undefined) return declared
  // A method, getter or property function of the class (or interface) named first.
  return declared && new RegExp(`^\\s+(?:(?:public|private|static|async|get|readonly)\\s+)*#?${member}\\s*[(<:=]`, 'm').test(source)
}

t.test('every function the request path links to is declared in the module it links to', async (t) => {
  t.ok(links.length >= 25, `the page links the steps to their code (${links.length} links)`)
  for (const { name, path } of links) {
    const file = join(ROOT, path)
    if (!existsSync(file)) {
      t.fail(`${path} (linked for ${name}) does not exist`)
      continue
    }
    t.ok(declares(readFileSync(file, 'utf8'), name), `${name} is declared in ${path}`)
  }
})

t.test('every repository path the page mentions exists', async (t) => {
  const paths = new Set([...doc.matchAll(/\b((?:src|test|docs|bench)\/[\w/.-]*\.(?:ts|md|js|html|css))\b/g)].map((m) => m[1] as string))
  t.ok(paths.size > 0)
  for (const p of paths) t.ok(existsSync(join(ROOT, p)), `${p} exists`)
})
