/** Structured text: blocks over one string, and a builder for formats whose text is a rendering (HTML, JSON, CSV, PDF). */
/** Builds a rendered text from blocks (HTML, JSON, CSV, PDF), joining them with blank lines. */
export class TextBuilder {
    #parts = [];
    #length = 0;
    blocks = [];
    heading(level, title) {
        const t = title.replace(/\s+/g, ' ').trim();
        if (t)
            this.#push({ kind: 'heading', level: Math.min(6, Math.max(1, level)), title: t }, t);
    }
    paragraph(text) {
        const t = text.trim();
        if (t)
            this.#push({ kind: 'paragraph', level: 0, title: '' }, t);
    }
    #push(b, text) {
        if (this.#parts.length > 0) {
            this.#parts.push('\n\n');
            this.#length += 2;
        }
        this.blocks.push({ ...b, start: this.#length, end: this.#length + text.length });
        this.#parts.push(text);
        this.#length += text.length;
    }
    build() {
        return { text: this.#parts.join(''), blocks: this.blocks };
    }
}
//# sourceMappingURL=text-builder.js.map