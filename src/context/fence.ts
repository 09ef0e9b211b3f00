/**
 * Fencing quoted text in the prompt: the knowledge-base excerpts and the recalled turns both quote text the model
 * must read as data, so neither can be allowed to close its fence early.
 */

/** A Markdown code fence longer than any backtick run in `text`, so nothing in `text` can close it early. */
export function fenceFor(text: string): string {
  let longest = 0
  for (const m of text.matchAll(/`+/g)) longest = Math.max(longest, m[0].length)
  return '`'.repeat(Math.max(3, longest + 1))
}
