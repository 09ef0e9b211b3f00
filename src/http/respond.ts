/** Writing responses: JSON bodies and the wire form of errors (the only place errors become bytes). */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { toWire, type GatewayError } from '../errors.js'
import { endAfterDrain, type DrainLimits } from './drain.js'

export function sendJson(res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void {
  sendJsonText(res, status, JSON.stringify(body), headers)
}

/** `text` must be JSON already (e.g. an upstream body relayed as is). */
export function sendJsonText(res: ServerResponse, status: number, text: string, headers?: Record<string, string>): void {
  writeJsonHead(res, status, text, headers)
  res.end(text)
}

function writeJsonHead(res: ServerResponse, status: number, text: string, headers?: Record<string, string>): void {
  res.statusCode = status
  if (headers) for (const [k, v] of Object.entries(headers)) res.setHeader(k, v)
  res.setHeader('content-type', 'application/json; charset=utf-8')
  res.setHeader('content-length', Buffer.byteLength(text))
}

export function sendError(res: ServerResponse, err: GatewayError): void {
  sendJson(res, err.status, toWire(err), err.headers)
}

/**
 * An error answered while the request's body is still unread (too large, refused key, rate limited): the whole
 * answer is written now, the rest of the body is read and discarded within `limits`, then the connection is closed.
 * Why not close at once: drain.ts.
 */
export function sendErrorBeforeBody(req: IncomingMessage, res: ServerResponse, err: GatewayError, limits: DrainLimits): void {
  const text = JSON.stringify(toWire(err))
  writeJsonHead(res, err.status, text, err.headers)
  res.setHeader('connection', 'close')
  res.write(text)
  endAfterDrain(req, res, limits)
}
