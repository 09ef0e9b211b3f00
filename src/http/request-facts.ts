/**
 * What a handler learns about its request while it runs, read once the response has finished by the request log line,
 * the metrics, usage and the trace (observe/request-done.ts). A class with every field declared, not a bag of optional
 * keys: one shape for every request, and a typo is a compile error rather than a field nobody reads.
 */
import type { StreamFailureReason } from '../types.js'

export class RequestFacts {
  /** The model the client asked for (what the model metrics label, once the upstream accepted it). */
  model: string | undefined = undefined
  stream: boolean | undefined = undefined
  /** Ms from sending the upstream request to its response headers: set once the upstream answered at all. */
  upstreamHeadersMs: number | undefined = undefined
  /** Ms from sending the upstream request to its last byte. */
  upstreamMs: number | undefined = undefined
  /** Ms from sending the upstream request to its first model output (streams). */
  ttftMs: number | undefined = undefined
  promptTokens: number | undefined = undefined
  completionTokens: number | undefined = undefined
  /** The part of the prompt the provider served from its cache. */
  cachedTokens: number | undefined = undefined
  /**
   * A stream that began (its 200 is on the wire) and did not complete, or a chat JSON reply relayed with its 200 whose
   * choice 0 failed while generating (`upstream_error`): why, the error code, and our message when the failure is ours
   * to describe. Reported beside the 200, or a failed exchange would pass for a success.
   */
  streamFailure: { reason: StreamFailureReason; code: string; message: string | undefined } | undefined = undefined
}
