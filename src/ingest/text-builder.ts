/** Structured text: blocks over one string, and a builder for formats whose text is a rendering (HTML, JSON, CSV, PDF). */

export interface Block {
  kind: 'heading' | 'paragraph'
  /** Heading level 1–6; 0 for paragraphs. */
  level: number
  /** The heading's text as it should appear in a heading path (markup removed); '' for paragraphs. */
  title: string
  /** Character range in `ExtractedText.text`. */
  start: number
  end: number
}

/**
 * Longest heading title kept in a heading path. Every chunk under a heading carries its path (stored, indexed and
 * shown in the prompt), so a heading line of megabytes (a Markdown `#` line with no break, an <h1> around a whole
 * page) must not be copied into each of them; the heading's own text is still chunked like any other.
 */
export const MAX_TITLE_CHARS = 200

/** `title`, cut to MAX_TITLE_CHARS (never inside a surrogate pair) with an ellipsis when it was longer. */
export function boundTitle(title: string): string {
  if (title.length <= MAX_TITLE_CHARS) return title
  let end = MAX_TITLE_CHARS - 1
  const c = title.charCodeAt(end - 1)
  if (c >= 0xd800 && c <= 0xdbff) end--
  return `${title.slice(0, end).trimEnd()}…`
}

/** Builds a rendered text from blocks (HTML, JSON, CSV, PDF), joining them with blank lines. */
export class TextBuilder {
  #parts: string[] = []
  #length = 0
  readonly blocks: Block[] = []

  heading(level: number, title: string): void {
    const t = title.replace(/\s+/g, ' ').trim()
    if (t) this.#push({ kind: 'heading', level: Math.min(6, Math.max(1, level)), title: boundTitle(t) }, t)
  }

  paragraph(text: string): void {
    const t = text.trim()
    if (t) this.#push({ kind: 'paragraph', level: 0, title: '' }, t)
  }

  #push(b: Omit<Block, 'start' | 'end'>, text: string): void {
    if (this.#parts.length > 0) {
      this.#parts.push('\n\n')
      this.#length += 2
    }
    this.blocks.push({ ...b, start: this.#length, end: this.#length + text.length })
    this.#parts.push(text)
    this.#length += text.length
  }

  build(): { text: string; blocks: Block[] } {
    return { text: this.#parts.join(''), blocks: this.blocks }
  }
}
