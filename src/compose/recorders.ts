/** The recorders part of the gateway: request traces and usage rows, written off the request path in batches. */
import type { Logger } from '../log.js'
import type { Stores } from '../storage/open-stores.js'
import { TraceRecorder } from '../traces/trace-recorder.js'
import { UsageRecorder } from '../usage/usage-recorder.js'
import type { Closers } from './closers.js'

export interface Recorders {
  readonly traces: TraceRecorder
  readonly usage: UsageRecorder
  /** A session's traces go with it (they hold its messages as they were sent). */
  onSessionDeleted(tenant: string, sessionId: string): Promise<void>
}

export function createRecorders(opts: { config: { requestTraces: number }; stores: Stores; now: () => number; logger: Logger; closers: Closers }): Recorders {
  const { stores, logger } = opts
  const traces = new TraceRecorder({
    store: stores.traces,
    keep: opts.config.requestTraces,
    onError: (err) => logger.warn({ err }, 'could not write request traces'),
  })
  const usage = new UsageRecorder({
    store: stores.usage,
    now: opts.now,
    onError: (err, lost) => logger.warn({ err, lost }, 'could not write usage: these rows are not counted'),
  })
  // Flushed before the stores close (registered after them, so closed before them).
  opts.closers.add(() => traces.flush())
  opts.closers.add(() => usage.flush())
  return {
    traces,
    usage,
    onSessionDeleted: async (tenant, sessionId) => {
      await traces.flush()
      await stores.traces.deleteSession(tenant, sessionId)
    },
  }
}
