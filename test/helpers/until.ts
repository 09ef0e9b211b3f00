/**
 * The one way tests wait for something to become true: a bounded poll that fails saying what it waited for. The
 * bound is a ceiling for a loaded machine, not a timing assertion: nothing is asserted about how soon it happens.
 */
export async function until(
  condition: () => boolean | Promise<boolean>,
  what: string,
  opts: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<void> {
  const timeoutMs = opts.timeoutMs ?? 60_000
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await condition()) return
    if (Date.now() > deadline) throw new Error(`gave up after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 20))
  }
}
