/**
 * /api/v1/admin/keys: service keys for operators who automate (list, create, read, rotate, set plan, revoke), the
 * same operations as `recallgate keys`. Guarded by ADMIN_KEY, sent as `Authorization: Bearer <ADMIN_KEY>`: a key of
 * its own, never a service key, so no tenant can manage keys. Without ADMIN_KEY the routes answer 404 as if they did
 * not exist (a deployment that never set one exposes nothing); with it, a missing or wrong admin key is a 401
 * `invalid_admin_key`. Not rate limited: the admin key is one secret held by the operator, not a tenant.
 */
import { timingSafeEqual } from 'node:crypto'
import { hashKey } from '../auth/service-keys.js'
import { gatewayError, invalidParam } from '../errors.js'
import { readJsonObject } from '../http/body.js'
import { sendJson } from '../http/respond.js'
import type { Handler, RequestContext } from '../http/server.js'
import type { KeyStore } from '../storage/interface.js'
import { PLANS, type Plan } from '../types.js'
import { keyObject, withSecret } from './key-object.js'

export interface AdminKeyRoutesOptions {
  /** ADMIN_KEY; undefined turns the routes off (404). */
  adminKey: string | undefined
  maxBodyBytes: number
}

const MAX_LABEL_LENGTH = 200

export function adminKeyRoutes(keys: KeyStore, o: AdminKeyRoutesOptions) {
  // Compared as digests of equal length in constant time: neither the key's length nor its prefix leaks.
  const expected = o.adminKey === undefined ? undefined : Buffer.from(hashKey(o.adminKey), 'hex')

  const guarded =
    (handler: Handler): Handler =>
    async (ctx) => {
      if (expected === undefined) throw gatewayError('not_found', { message: `No route for ${ctx.req.method} ${ctx.req.url?.split('?')[0]}` })
      const presented = /^Bearer\s+(\S+)\s*$/i.exec(ctx.req.headers.authorization ?? '')?.[1]
      if (presented === undefined || !timingSafeEqual(Buffer.from(hashKey(presented), 'hex'), expected)) throw gatewayError('invalid_admin_key')
      await handler(ctx)
    }

  const idOf = (ctx: RequestContext): string => ctx.params.id ?? ''
  const noKey = (id: string, active: boolean): Error =>
    gatewayError('not_found', { param: 'id', message: `No ${active ? 'active ' : ''}service key with id ${JSON.stringify(id)}` })

  const list: Handler = async (ctx) => {
    sendJson(ctx.res, 200, { object: 'list', data: (await keys.list()).map(keyObject) })
  }

  const create: Handler = async (ctx) => {
    const body = await readJsonObject(ctx.req, o.maxBodyBytes)
    const plan = body.plan === undefined ? 'pro' : planField(body.plan)
    sendJson(ctx.res, 201, withSecret(await keys.create(plan, labelField(body.label))))
  }

  const get: Handler = async (ctx) => {
    const record = await keys.get(idOf(ctx))
    if (record === undefined) throw noKey(idOf(ctx), false)
    sendJson(ctx.res, 200, keyObject(record))
  }

  /** POST /admin/keys/{id} `{plan}`: OpenAI's update-by-POST. */
  const update: Handler = async (ctx) => {
    const body = await readJsonObject(ctx.req, o.maxBodyBytes)
    if (body.plan === undefined) throw gatewayError('missing_parameter', { param: 'plan', message: `plan is required (one of ${PLANS.join(', ')})` })
    const record = await keys.setPlan(idOf(ctx), planField(body.plan))
    if (record === undefined) throw noKey(idOf(ctx), true)
    sendJson(ctx.res, 200, keyObject(record))
  }

  const rotate: Handler = async (ctx) => {
    const made = await keys.rotate(idOf(ctx))
    if (made === undefined) throw noKey(idOf(ctx), true)
    sendJson(ctx.res, 201, withSecret(made))
  }

  /** DELETE revokes: the record stays (listed, revoked), and the key answers 401 `key_revoked` from now on. */
  const revoke: Handler = async (ctx) => {
    const id = idOf(ctx)
    if (!(await keys.revoke(id))) throw noKey(id, true)
    const record = await keys.get(id)
    if (record === undefined) throw noKey(id, false)
    sendJson(ctx.res, 200, keyObject(record))
  }

  return {
    list: guarded(list),
    create: guarded(create),
    get: guarded(get),
    update: guarded(update),
    rotate: guarded(rotate),
    revoke: guarded(revoke),
  }
}

function planField(v: unknown): Plan {
  if (typeof v !== 'string' || !(PLANS as readonly string[]).includes(v)) throw invalidParam('plan', `plan must be one of ${PLANS.join(', ')}`)
  return v as Plan
}

function labelField(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'string' || v.length > MAX_LABEL_LENGTH) throw invalidParam('label', `label must be a string of at most ${MAX_LABEL_LENGTH} characters`)
  return v === '' ? undefined : v
}
