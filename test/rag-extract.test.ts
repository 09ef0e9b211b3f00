/**
 * Every supported format from small fixtures made here (including a hand-written PDF with a text layer), format
 * detection by content type / extension / bytes, and the 415 / 400 refusals.
 */
import t, { type Test } from 'tap'
import { GatewayError } from '../src/errors.js'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { atxHeading, detectFormat, extract, stripInlineMarkdown, type ExtractedText } from '../src/ingest/extract.js'
import { parseCsv } from '../src/ingest/extract-data.js'
import { MAX_HTML_DEPTH } from '../src/ingest/extract-html.js'
import { MAX_TITLE_CHARS } from '../src/ingest/text-builder.js'
import { makePdf, upload } from './helpers/format-fixtures.js'

function blockTexts(x: ExtractedText): Array<[string, string]> {
  return x.blocks.map((b) => [b.kind === 'heading' ? `h${b.level}` : 'p', x.text.slice(b.start, b.end)])
}

async function rejects(t: Test, p: Promise<unknown>, code: string, status: number): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  )
  t.ok(err instanceof GatewayError, `rejected with a GatewayError (${String(err)})`)
  t.equal((err as GatewayError).code, code)
  t.equal((err as GatewayError).status, status)
}

t.test('plain text keeps the file text and splits paragraphs on blank lines', async (t) => {
  const x = await extract(upload('notes.txt', '\ufeffFirst line\r\nstill first.\r\n\r\n  Second paragraph.  \n\n\n'))
  t.equal(x.format, 'text')
  t.equal(x.text, 'First line\nstill first.\n\n  Second paragraph.  \n\n\n', 'BOM dropped, CRLF normalised')
  t.same(blockTexts(x), [
    ['p', 'First line\nstill first.'],
    ['p', 'Second paragraph.'],
  ])
})

t.test('markdown: ATX and setext headings, fenced code is not a heading', async (t) => {
  const md = ['# Guide', '', 'Intro text.', '', 'Setup', '-----', 'Run **it**.', '', '```sh', '# not a heading', '```', '', '### Deep *dive* ###', 'Body.'].join('\n')
  const x = await extract(upload('guide.md', md))
  t.equal(x.format, 'markdown')
  t.same(blockTexts(x), [
    ['h1', '# Guide'],
    ['p', 'Intro text.'],
    ['h2', 'Setup\n-----'],
    ['p', 'Run **it**.'],
    ['p', '```sh\n# not a heading\n```'],
    ['h3', '### Deep *dive* ###'],
    ['p', 'Body.'],
  ])
  t.same(
    x.blocks.filter((b) => b.kind === 'heading').map((b) => b.title),
    ['Guide', 'Setup', 'Deep dive'],
    'heading titles without markup',
  )
})

t.test('html: visible text only, headings, entities, tables, title', async (t) => {
  const html = `<!doctype html><html><head><title>Handbook</title><style>p{color:red}</style>
    <script>var secret = "SCRIPT-TEXT"</script></head><body>
    <h1>Leave &amp; holidays</h1><p>Staff get <b>25</b>\n   days.</p>
    <div hidden>HIDDEN-TEXT</div><noscript>NOSCRIPT-TEXT</noscript>
    <ul><li>One</li><li>Two</li></ul>
    <table><tr><th>Plan</th><th>Days</th></tr><tr><td>Basic</td><td>20</td></tr></table>
    <pre>line 1
line 2</pre></body></html>`
  const x = await extract(upload('page.html', html, 'text/html; charset=utf-8'))
  t.equal(x.format, 'html')
  t.notMatch(x.text, /SCRIPT-TEXT|HIDDEN-TEXT|NOSCRIPT-TEXT|color:red/)
  t.same(blockTexts(x), [
    ['h1', 'Handbook'],
    ['h2', 'Leave & holidays'],
    ['p', 'Staff get 25 days.'],
    ['p', 'One'],
    ['p', 'Two'],
    ['p', 'Plan | Days'],
    ['p', 'Basic | 20'],
    ['p', 'line 1\nline 2'],
  ])
})

t.test('json: key paths and values, one paragraph per top-level entry', async (t) => {
  const json = JSON.stringify({ name: 'recallgate', version: 2, servers: [{ host: 'a.example', port: 8080 }], 'odd key': null })
  const x = await extract(upload('config.json', json))
  t.equal(x.format, 'json')
  t.same(blockTexts(x), [
    ['p', 'name: recallgate\nversion: 2'],
    ['p', 'servers[0].host: a.example\nservers[0].port: 8080'],
    ['p', '"odd key": null'],
  ])
  const notJson = await extract(upload('broken.json', '{"a": tru'))
  t.equal(notJson.text, '{"a": tru', 'invalid JSON is still indexed as text')
})

t.test('csv: rows as "header: value" lines, quotes and delimiters', async (t) => {
  const csv = 'name,role,notes\n"Smith, Ann",engineer,"says ""hi""\nand leaves"\nBob,,\n'
  const x = await extract(upload('people.csv', csv))
  t.equal(x.format, 'csv')
  t.same(blockTexts(x), [
    ['p', 'name: Smith, Ann\nrole: engineer\nnotes: says "hi"\nand leaves'],
    ['p', 'name: Bob'],
  ])
  const semi = await extract(upload('data.csv', 'a;b\n1;2\n'))
  t.equal(semi.text, 'a: 1\nb: 2', 'semicolon delimiter sniffed')
  const tsv = await extract(upload('data.tsv', 'a\tb\n1\t2\n'))
  t.equal(tsv.text, 'a: 1\nb: 2')
})

t.test('pdf: the text layer, paragraphs by vertical gaps and pages', async (t) => {
  const pdf = makePdf([
    ['Quarterly report.', 'The secret code is ZEBRA-42.', '', 'A new paragraph (after a gap).'],
    ['Page two text.'],
  ])
  const x = await extract(upload('report.pdf', pdf, 'application/pdf'))
  t.equal(x.format, 'pdf')
  t.same(blockTexts(x), [
    ['p', 'Quarterly report. The secret code is ZEBRA-42.'],
    ['p', 'A new paragraph (after a gap).'],
    ['p', 'Page two text.'],
  ])
})

t.test('format detection: content type, extension, bytes', async (t) => {
  const d = (filename: string, contentType: string | undefined, content = 'hello') =>
    detectFormat({ filename, contentType, bytes: Buffer.from(content) })
  t.equal(d('a.md', 'text/plain'), 'markdown', 'a known extension beats generic text/plain')
  t.equal(d('a.txt', 'text/html'), 'html', 'a specific content type wins')
  t.equal(d('a.csv', 'application/octet-stream'), 'csv')
  t.equal(d('README', undefined), 'text', 'no extension, no type, text bytes')
  t.equal(d('scan', undefined, '%PDF-1.4 ...'), 'pdf', 'PDF magic')
  t.equal(d('notes', 'text/plain'), 'text')
  for (const [name, type] of [
    ['photo.png', 'image/png'],
    ['a.docx', undefined],
    ['script.py', undefined],
    ['blob', 'application/zip'],
  ] as const)
    t.throws(() => d(name, type), { code: 'unsupported_media_type', status: 415 }, `${name} refused`)
  t.throws(() => d('blob', undefined, 'PK\u0003\u0004\u0000\u0000binary'), { code: 'unsupported_media_type' }, 'binary bytes refused')
})

t.test('refusals: unsupported → 415, no text → 400, broken PDF → 400', async (t) => {
  await rejects(t, extract(upload('image.png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0]), 'image/png')), 'unsupported_media_type', 415)
  await rejects(t, extract(upload('a.txt', Buffer.from([0x41, 0, 0x42]))), 'unsupported_media_type', 415)
  await rejects(t, extract(upload('empty.txt', '')), 'empty_file', 400)
  await rejects(t, extract(upload('blank.md', ' \n\n  \t\n#\n')), 'empty_file', 400)
  await rejects(t, extract(upload('only-markup.html', '<script>x()</script><p>  </p>')), 'empty_file', 400)
  await rejects(t, extract(upload('blank.pdf', makePdf([[]]))), 'empty_file', 400)
  await rejects(t, extract(upload('bad.pdf', '%PDF-1.4 garbage')), 'invalid_parameter', 400)
})

t.test('text that is not UTF-8 is read as Windows-1252, not refused', async (t) => {
  const x = await extract(upload('latin.txt', Buffer.from([0x63, 0x61, 0x66, 0xe9])))
  t.equal(x.text, 'café')
})

// The scanners below replaced regexes that were quadratic on long lines (see test/ingest-shapes.test.ts); each is held
// to the regex or loop it replaced, on random lines made of the characters that matter to it.
const OLD_ATX = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/

t.test('property: the Markdown heading scanner answers as the regex it replaced', async (t) => {
  const line = fc.string({ unit: fc.constantFrom('#', ' ', '\t', 'a', 'b', '*', '\u00a0', '\u2028', '\n'), maxLength: 24 })
  fc.assert(
    fc.property(line, (l) => {
      const m = OLD_ATX.exec(l)
      const want = m ? { level: (m[1] as string).length, title: (m[2] ?? '').trim() } : undefined
      return JSON.stringify(atxHeading(l)) === JSON.stringify(want)
    }),
    { numRuns: 3000 },
  )
  t.pass('3000 random lines')
})

t.test('property: the inline-markup stripper answers as the regexes it replaced', async (t) => {
  const old = (s: string): string => s.replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/[*_`~]+/g, '').trim()
  const title = fc.string({ unit: fc.constantFrom('[', ']', '(', ')', '!', 'a', ' ', '*', '`'), maxLength: 30 })
  fc.assert(
    fc.property(title, (s) => {
      return stripInlineMarkdown(s) === old(s)
    }),
    { numRuns: 3000 },
  )
  t.pass('3000 random titles')
})

t.test('property: the CSV parser reads quotes as it did before its white-space test became a flag', async (t) => {
  // The parser as it was, trimming the cell at every quote.
  const before = (text: string, delimiter: string): string[][] => {
    const rows: string[][] = []
    let row: string[] = []
    let cell = ''
    let quoted = false
    for (let i = 0; i < text.length; i++) {
      const ch = text[i] as string
      if (quoted) {
        if (ch === '"' && text[i + 1] === '"') {
          cell += '"'
          i++
        } else if (ch === '"') quoted = false
        else cell += ch
      } else if (ch === '"' && cell.trim() === '') {
        quoted = true
        cell = ''
      } else if (ch === delimiter) {
        row.push(cell)
        cell = ''
      } else if (ch === '\n') {
        row.push(cell)
        if (row.some((c) => c.trim() !== '')) rows.push(row)
        row = []
        cell = ''
      } else cell += ch
    }
    row.push(cell)
    if (row.some((c) => c.trim() !== '')) rows.push(row)
    return rows
  }
  const text = fc.string({ unit: fc.constantFrom('"', ',', '\n', ' ', 'a', '\t'), maxLength: 30 })
  fc.assert(
    fc.property(text, (s) => {
      return JSON.stringify(parseCsv(s, ',')) === JSON.stringify(before(s, ','))
    }),
    { numRuns: 3000 },
  )
  t.pass('3000 random texts')
})

t.test('html nested deeper than browsers nest is refused with a 400 that says what to do', async (t) => {
  await rejects(t, extract(upload('deep.html', '<div>'.repeat(MAX_HTML_DEPTH + 1) + 'text')), 'invalid_parameter', 400)
  const ok = await extract(upload('deep-ok.html', '<div>'.repeat(MAX_HTML_DEPTH - 10) + 'text'))
  t.equal(ok.text, 'text', 'nesting up to the bound is read')
})

t.test('heading titles are bounded; the heading text itself is kept whole', async (t) => {
  const long = 'word '.repeat(1000).trim()
  const md = await extract(upload('long.md', `# ${long}\n\nBody.`))
  const h = md.blocks[0]
  t.equal(h?.kind, 'heading')
  t.equal(h?.title.length, MAX_TITLE_CHARS)
  t.ok(h?.title.endsWith('…'))
  t.equal(md.text.slice(h?.start, h?.end), `# ${long}`)
  const html = await extract(upload('long.html', `<h2>${long}</h2><p>Body.</p>`))
  t.equal(html.blocks[0]?.title.length, MAX_TITLE_CHARS)
  t.equal(html.text.slice(html.blocks[0]?.start, html.blocks[0]?.end), long)
})
