/**
 * What a gateway has opened, closed in the reverse order it was opened: by `close()` after the server drained, and
 * by a start that failed halfway (a port already taken, a database that would not answer), so that a failed start
 * leaves no store locked, no pool or worker thread holding the process open.
 */
export class Closers {
  private readonly steps: (() => Promise<void>)[] = []

  /** Registered right after the resource opened, so that a failure just after it still closes it. */
  add(step: () => Promise<void>): void {
    this.steps.push(step)
  }

  /**
   * Every step runs even when one fails (a failed flush must not leave the store open); the first failure is thrown
   * once all have run.
   */
  async closeAll(): Promise<void> {
    let first: { err: unknown } | undefined
    for (const step of this.steps.splice(0).reverse()) {
      try {
        await step()
      } catch (err) {
        first ??= { err }
      }
    }
    if (first) throw first.err
  }
}
