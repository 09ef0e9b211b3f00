/**
 * POST /api/v1/responses/input_tokens (the SDKs' `responses.inputTokens.count`): the tokens of the prompt that
 * `POST /responses` would send upstream for the same body, as the gateway counts and packs it (the chain or the
 * conversation's history that fits, retrieved excerpts, tool definitions, the output schema), so that a client can
 * size a request before making it. Built by the same preparation (prepare-turn.ts): the same errors, and the same
 * reads of the store and the knowledge base, but no upstream call and nothing saved or remembered.
 */
import { sendJson } from '../http/respond.js'
import type { Handler } from '../http/server.js'
import { prepareTurn, type PrepareTurnOptions } from './prepare-turn.js'

export function inputTokensHandler(o: PrepareTurnOptions): Handler {
  return async (ctx) => {
    // No ctx.trace: a trace is a request's record of what went upstream, and nothing does.
    const { prepared } = await prepareTurn(o, ctx, { countOnly: true })
    sendJson(ctx.res, 200, { object: 'response.input_tokens', input_tokens: prepared.countedTokens })
  }
}
