/**
 * Uploads of hostile shape, each made to a requested size in characters: the inputs that once made ingestion
 * superlinear (or overflowed the stack), plus prose as the baseline. Shared by bench/ingest-shapes.ts, which measures
 * how their cost grows with size, and test/ingest-shapes.test.ts, which checks they ingest at all. Deterministic.
 */
import { mulberry32 } from '../../src/mock-upstream/prng.js'
import { Corpus } from './corpus.js'

export interface Shape {
  name: string
  /** What it is, and what it used to cost. */
  what: string
  filename: string
  make(chars: number): string
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'

function base64Like(chars: number, seed: number): string {
  const random = mulberry32(seed)
  const out: string[] = []
  for (let i = 0; i < chars; i++) out.push(B64[Math.floor(random() * 64)] as string)
  return out.join('')
}

function repeatTo(unit: string, chars: number): string {
  return unit.repeat(Math.max(1, Math.ceil(chars / unit.length))).slice(0, chars)
}

/** Ordinary prose: the baseline every shape is compared with. */
export const PROSE: Shape = {
  name: 'prose',
  what: 'paragraphs of sentences (the baseline)',
  filename: 'prose.txt',
  make(chars) {
    const corpus = new Corpus(7)
    const parts: string[] = []
    let n = 0
    while (n < chars) {
      const p = corpus.paragraph(60)
      parts.push(p)
      n += p.length + 2
    }
    return parts.join('\n\n').slice(0, chars)
  },
}

export const HOSTILE_SHAPES: readonly Shape[] = [
  {
    name: 'base64-lines',
    what: 'base64 in 200-character lines (1 MB: 6–9 s before)',
    filename: 'lines.log',
    make: (chars) => (base64Like(chars, 1).match(/.{1,200}/gs) ?? []).join('\n'),
  },
  {
    name: 'base64-one-line',
    what: 'base64 on one line (1 MB: 13–17 s before)',
    filename: 'one.log',
    make: (chars) => base64Like(chars, 2),
  },
  {
    name: 'letters-run',
    what: 'one letter repeated, no white space (quadratic chunking before)',
    filename: 'run.txt',
    make: (chars) => 'a'.repeat(chars),
  },
  {
    name: 'cjk-run',
    what: 'CJK text without spaces or punctuation (2 MB: 31 s before)',
    filename: 'cjk.txt',
    make: (chars) => repeatTo('漢字仮名交じり文', chars),
  },
  {
    name: 'space-run',
    what: 'a run of spaces between two words (100 KB: 30 s before)',
    filename: 'spaces.txt',
    make: (chars) => `start${' '.repeat(Math.max(0, chars - 8))}end`,
  },
  {
    name: 'md-heading-spaces',
    what: 'a Markdown heading line of spaces (50 KB: 11 s before)',
    filename: 'heading.md',
    make: (chars) => `# a${' '.repeat(Math.max(0, chars - 5))}b\n\nbody`,
  },
  {
    name: 'md-heading-brackets',
    what: 'a Markdown heading of unclosed [ (50 KB: 5 s before)',
    filename: 'brackets.md',
    make: (chars) => `# a${'['.repeat(Math.max(0, chars - 3))}`,
  },
  {
    name: 'md-heading-words',
    what: 'a Markdown heading line of words (its title went into every chunk’s heading path)',
    filename: 'title.md',
    make: (chars) => `# ${repeatTo('word ', chars / 2)}\n\n${repeatTo('Body text here. ', chars / 2)}`,
  },
  {
    name: 'csv-quotes',
    what: 'a CSV cell of quotes (200 KB: 15 s before)',
    filename: 'quotes.csv',
    make: (chars) => `h\na${'"'.repeat(Math.max(0, chars - 3))}`,
  },
  {
    name: 'html-row',
    what: 'one HTML table row of many cells (200 KB: 2.6 s before)',
    filename: 'row.html',
    make: (chars) => `<table><tr>${repeatTo('<td>x', chars)}`,
  },
  {
    name: 'html-pre-spaces',
    what: 'a <pre> of spaces (50 KB: 4.4 s before)',
    filename: 'pre.html',
    make: (chars) => `<pre>a${' '.repeat(Math.max(0, chars - 16))}b</pre>`,
  },
  {
    name: 'html-closes',
    what: '500 open elements, then many unmatched end tags (each searched the open elements)',
    filename: 'closes.html',
    make: (chars) => '<div>'.repeat(500) + repeatTo('x</y>', chars),
  },
]
