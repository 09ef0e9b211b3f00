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

/** Builds a rendered text from blocks (HTML, JSON, CSV, PDF), joining them with blank lines. */
export class TextBuilder {
  #parts: string[] = []
  #length = 0
  readonly blocks: Block[] = []

  heading(level: number, title: string): void {
    const t = title.replace(/\s+/g, ' ').trim()
    if (t) this.#push({ kind: 'heading', level: Math.min(6, Math.max(1, level)), title: t }, t)
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
