/**
 * Cooperative time slicing for long synchronous work on the event loop (loading or rebuilding an index, applying a
 * large upload to it): the work checks `due()` between small steps and, when its slice is spent, `await pause()`s, which
 * lets pending I/O (other requests, open streams) run before it continues. A 100k-chunk index takes seconds of CPU to
 * load; done in one go it stalled every request of every tenant for that long.
 *
 * `performance.now()` measures the cost of the work here, not time the program reasons about, so it is not injected.
 */

/** Default slice: event-loop delay stays well under the 20 ms p99 target (issue 18) with a request's work on top. */
export const DEFAULT_SLICE_MS = 5

export class TimeSlicer {
  readonly #budget: number
  #start = performance.now()

  constructor(budgetMs: number = DEFAULT_SLICE_MS) {
    this.#budget = budgetMs
  }

  /** The current slice is spent: the caller should `await pause()` before the next step. */
  due(): boolean {
    return performance.now() - this.#start >= this.#budget
  }

  /** Let the event loop run (I/O callbacks included: `setImmediate` runs after the poll phase), then start a new slice. */
  async pause(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve))
    this.#start = performance.now()
  }
}
