/** Writing responses: JSON bodies and the wire form of errors (the only place errors become bytes). */
import type { ServerResponse } from 'node:http'
import { toWire, type GatewayError } from '../errors.js'

export function sendJson(res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void {
  sendJsonText(res, status, JSON.stringify(body), headers)
}

/** `text` must be JSON already (e.g. an upstream body relayed as is). */
export function sendJsonText(res: ServerResponse, status: number, text: string, headers?: Record<string, string>): void {
  res.statusCode = status
  if (headers) for (const [k, v] of Object.entries(headers)) res.setHeader(k, v)
  res.setHeader('content-type', 'application/json; charset=utf-8')
  res.setHeader('content-length', Buffer.byteLength(text))
  res.end(text)
}

export function sendError(res: ServerResponse, err: GatewayError): void {
  sendJson(res, err.status, toWire(err), err.headers)
}
