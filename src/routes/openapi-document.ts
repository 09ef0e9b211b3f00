/**
 * The whole API as an OpenAPI 3.1 document (GET /openapi.json). Shapes are given at the level a client needs: the
 * fields recallgate reads, adds or answers with, OpenAI's own schemas referenced rather than copied (everything else
 * an OpenAI request may hold passes through). test/openapi.e2e.test.ts keeps its paths in step with the routes the
 * gateway registers, both ways.
 */
import { ERROR_CODES } from '../errors.js'
import { PLANS } from '../types.js'
import { sendJsonText } from '../http/respond.js'
import type { Handler } from '../http/server.js'

type Schema = Record<string, unknown>

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` })
const json = (schema: Schema, description: string): Schema => ({ description, content: { 'application/json': { schema } } })
const errors = (...statuses: number[]): Record<string, Schema> =>
  Object.fromEntries(statuses.map((s) => [String(s), { $ref: `#/components/responses/Error${s}` }]))
const idParam = (name: string, description: string): Schema => ({
  name,
  in: 'path',
  required: true,
  description: `${description} (URL-encoded: ids may contain \`/\`)`,
  schema: { type: 'string' },
})
const queryParam = (name: string, schema: Schema, description: string): Schema => ({ name, in: 'query', required: false, description, schema })

/** An authenticated call: the service key, and where the upstream is called, the provider key too. */
const tenantOnly = [{ serviceKey: [] }]
const tenantAndProvider = [{ serviceKey: [], providerKey: [] }]
/** The operator's routes: ADMIN_KEY, never a service key (404 when ADMIN_KEY is not set). */
const adminOnly = [{ adminKey: [] }]
const open: never[] = []

interface Op {
  summary: string
  security: unknown[]
  parameters?: Schema[]
  requestBody?: Schema
  responses: Record<string, Schema>
}

const op = (o: Op): Schema => o as unknown as Schema

const deleted = (object: string): Schema => ({
  type: 'object',
  required: ['id', 'object', 'deleted'],
  properties: { id: { type: 'string' }, object: { const: object }, deleted: { const: true } },
})

const list = (item: Schema): Schema => ({
  type: 'object',
  required: ['object', 'data'],
  properties: { object: { const: 'list' }, data: { type: 'array', items: item } },
})

/** `info.version` is the API's (the /api/v1 prefix), not the package's: the document changes with the routes. */
export function openApiDocument(): Schema {
  const statuses = [...new Set(Object.values(ERROR_CODES).map((d) => d.status))].sort((a, b) => a - b)
  return {
    openapi: '3.1.0',
    info: {
      title: 'recallgate',
      version: 'v1',
      description:
        'An OpenAI-compatible chat gateway with memory, retrieval and context packing. Every /api/v1 route needs a ' +
        'service key in the `serviceKey` header; routes that call the upstream also need the provider key as ' +
        '`Authorization: Bearer <key>`, forwarded as sent and never stored. Every response carries `x-request-id`.',
    },
    servers: [{ url: '/' }],
    components: {
      securitySchemes: {
        serviceKey: { type: 'apiKey', in: 'header', name: 'serviceKey', description: "recallgate's key: the tenant and its plan" },
        providerKey: { type: 'http', scheme: 'bearer', description: "the upstream provider's key, forwarded as sent" },
        adminKey: { type: 'http', scheme: 'bearer', description: 'ADMIN_KEY: the /api/v1/admin routes (they answer 404 while it is not set)' },
      },
      schemas: {
        Error: {
          type: 'object',
          required: ['error'],
          description: "OpenAI's error shape, ours and the upstream's alike",
          properties: {
            error: {
              type: 'object',
              required: ['message', 'type', 'param', 'code'],
              properties: {
                message: { type: 'string' },
                type: { type: 'string' },
                param: { type: ['string', 'null'], description: 'the field at fault, e.g. `messages[2].content`' },
                code: { type: ['string', 'null'], description: "one of the gateway's codes, or the upstream's", examples: Object.keys(ERROR_CODES) },
              },
            },
          },
        },
        ChatCompletionRequest: {
          type: 'object',
          required: ['model', 'messages'],
          additionalProperties: true,
          description: "OpenAI's chat completion request (other fields pass through to the upstream) plus four extensions never sent upstream",
          properties: {
            model: { type: 'string', examples: ['openai/gpt-4o'] },
            messages: { type: 'array', items: { type: 'object' }, minItems: 1 },
            stream: { type: 'boolean' },
            temperature: { type: 'number', minimum: 0, maximum: 2 },
            top_p: { type: 'number', minimum: 0, maximum: 1 },
            max_tokens: { type: 'integer', minimum: 1 },
            max_completion_tokens: { type: 'integer', minimum: 1 },
            sessionId: { type: 'string', description: 'the session this exchange belongs to (also `x-session-id`)' },
            saveToMemory: { type: 'boolean', default: true },
            useRAG: { type: 'boolean', default: true },
            ragQuery: { type: 'string', description: 'what to search the knowledge base for instead of the last user message' },
          },
        },
        Metadata: {
          type: 'object',
          description: '`_metadata`: how the prompt was built (memory, rag, context)',
          properties: { memory: { type: 'object' }, rag: { type: 'object' }, context: { type: 'object' } },
        },
        ChatCompletion: {
          type: 'object',
          additionalProperties: true,
          description: "OpenAI's chat completion (or, with `stream: true`, `text/event-stream` of chunks; the first carries `_metadata`)",
          properties: {
            id: { type: 'string' },
            object: { const: 'chat.completion' },
            model: { type: 'string' },
            choices: { type: 'array', items: { type: 'object' } },
            usage: { type: 'object' },
            _metadata: ref('Metadata'),
          },
        },
        ResponseRequest: {
          type: 'object',
          required: ['model'],
          additionalProperties: true,
          description: "OpenAI's Responses API request",
          properties: {
            model: { type: 'string' },
            input: { oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'object' } }] },
            instructions: { type: 'string' },
            stream: { type: 'boolean' },
            store: { type: 'boolean', default: true },
            previous_response_id: { type: 'string' },
            conversation: { oneOf: [{ type: 'string' }, { type: 'object' }] },
            tools: { type: 'array', items: { type: 'object' } },
          },
        },
        InputTokens: {
          type: 'object',
          required: ['object', 'input_tokens'],
          properties: { object: { const: 'response.input_tokens' }, input_tokens: { type: 'integer', minimum: 0 } },
        },
        Response: {
          type: 'object',
          additionalProperties: true,
          description: "OpenAI's response object, plus `_metadata`",
          properties: {
            id: { type: 'string' },
            object: { const: 'response' },
            status: { type: 'string' },
            output: { type: 'array', items: { type: 'object' } },
            usage: { type: 'object' },
            _metadata: ref('Metadata'),
          },
        },
        Conversation: {
          type: 'object',
          properties: { id: { type: 'string' }, object: { const: 'conversation' }, created_at: { type: 'integer' }, metadata: { type: 'object' } },
        },
        Item: { type: 'object', additionalProperties: true, properties: { id: { type: 'string' }, type: { type: 'string' } } },
        Session: {
          type: 'object',
          properties: {
            id: { type: 'string' },
            object: { const: 'session' },
            messages: { type: 'array', items: { type: 'object' } },
            created_at: { type: 'integer' },
            updated_at: { type: 'integer' },
          },
        },
        SessionList: {
          type: 'object',
          properties: {
            object: { const: 'list' },
            data: { type: 'array', items: { type: 'object' } },
            first_id: { type: ['string', 'null'] },
            last_id: { type: ['string', 'null'] },
            has_more: { type: 'boolean' },
          },
        },
        File: {
          type: 'object',
          properties: {
            id: { type: 'string' },
            object: { const: 'file' },
            filename: { type: 'string' },
            bytes: { type: 'integer' },
            chunks: { type: 'integer' },
            status: { const: 'processed' },
            content_type: { type: 'string' },
            created_at: { type: 'integer' },
            metadata: { type: ['object', 'null'] },
          },
        },
        SearchResult: {
          type: 'object',
          properties: {
            file_id: { type: 'string' },
            filename: { type: 'string' },
            metadata: { type: ['object', 'null'] },
            chunk_index: { type: 'integer' },
            score: { type: 'number' },
            text: { type: 'string' },
          },
        },
        Model: {
          type: 'object',
          additionalProperties: true,
          description: "the upstream's model entry as it lists it",
          properties: { id: { type: 'string' }, object: { type: 'string' }, context_length: { type: 'integer' } },
        },
        EmbeddingRequest: {
          type: 'object',
          required: ['model', 'input'],
          additionalProperties: true,
          properties: {
            model: { type: 'string' },
            input: { oneOf: [{ type: 'string' }, { type: 'array' }] },
            encoding_format: { enum: ['float', 'base64'] },
            dimensions: { type: 'integer' },
          },
        },
        EmbeddingList: {
          type: 'object',
          additionalProperties: true,
          description: "the upstream's answer, relayed",
          properties: { object: { const: 'list' }, data: { type: 'array', items: { type: 'object' } }, model: { type: 'string' }, usage: { type: 'object' } },
        },
        UsageRow: {
          type: 'object',
          required: ['date', 'model', 'requests', 'input_tokens', 'output_tokens', 'cached_tokens'],
          properties: {
            date: { type: 'string', format: 'date', description: 'UTC day' },
            model: { type: 'string' },
            requests: { type: 'integer' },
            input_tokens: { type: 'integer' },
            output_tokens: { type: 'integer' },
            cached_tokens: { type: 'integer' },
          },
        },
        ServiceKey: {
          type: 'object',
          required: ['id', 'object', 'tenant', 'plan', 'label', 'created_at', 'revoked_at'],
          properties: {
            id: { type: 'string', examples: ['key_1a2b3c4d5e6f'] },
            object: { const: 'service_key' },
            tenant: { type: 'string', description: 'the tenant the key opens; kept when the key is rotated or moved to another plan' },
            plan: { enum: ['free', 'pro', 'premium', 'enterprise', 'unlimited'] },
            label: { type: ['string', 'null'] },
            created_at: { type: 'integer', description: 'unix seconds' },
            revoked_at: { type: ['integer', 'null'], description: 'unix seconds' },
            key: { type: 'string', description: 'the raw key: only in the answer to a create or a rotate, never again' },
          },
        },
        RequestTrace: { type: 'object', additionalProperties: true, properties: { id: { type: 'string' }, route: { type: 'string' }, model: { type: 'string' } } },
      },
      responses: Object.fromEntries(statuses.map((s) => [`Error${s}`, json(ref('Error'), `error (${Object.entries(ERROR_CODES).filter(([, d]) => d.status === s).map(([c]) => c).join(', ')})`)])),
    },
    paths: {
      '/healthz': { get: op({ summary: 'liveness', security: open, responses: { '200': json({ type: 'object' }, 'alive') } }) },
      '/readyz': {
        get: op({ summary: 'readiness: the stores (and, with READY_CHECK_UPSTREAM=1, the upstream)', security: open, responses: { '200': json({ type: 'object' }, 'ready'), '503': json({ type: 'object' }, 'not ready') } }),
      },
      '/metrics': {
        get: op({ summary: 'Prometheus metrics', security: open, responses: { '200': { description: 'Prometheus text format', content: { 'text/plain': { schema: { type: 'string' } } } } } }),
      },
      '/openapi.json': { get: op({ summary: 'this document', security: open, responses: { '200': json({ type: 'object' }, 'OpenAPI 3.1') } }) },
      '/console': { get: op({ summary: 'the web console', security: open, responses: { '200': { description: 'HTML', content: { 'text/html': {} } } } }) },
      '/console/app.js': { get: op({ summary: "the console's script", security: open, responses: { '200': { description: 'JavaScript', content: { 'text/javascript': {} } } } }) },
      '/console/app.css': { get: op({ summary: "the console's style sheet", security: open, responses: { '200': { description: 'CSS', content: { 'text/css': {} } } } }) },
      '/api/v1/chat/completions': {
        post: op({
          summary: 'chat completion with memory, retrieval and packing',
          security: tenantAndProvider,
          parameters: [{ name: 'x-session-id', in: 'header', required: false, schema: { type: 'string' } }],
          requestBody: { required: true, content: { 'application/json': { schema: ref('ChatCompletionRequest') } } },
          responses: {
            '200': { description: 'a completion, or an event stream', content: { 'application/json': { schema: ref('ChatCompletion') }, 'text/event-stream': {} } },
            ...errors(400, 401, 403, 404, 413, 429, 502, 503, 504),
          },
        }),
      },
      '/api/v1/responses': {
        post: op({
          summary: "OpenAI's Responses API on every upstream model",
          security: tenantAndProvider,
          requestBody: { required: true, content: { 'application/json': { schema: ref('ResponseRequest') } } },
          responses: {
            '200': { description: 'a response, or an event stream', content: { 'application/json': { schema: ref('Response') }, 'text/event-stream': {} } },
            ...errors(400, 401, 413, 429, 502, 503, 504),
          },
        }),
      },
      '/api/v1/responses/input_tokens': {
        post: op({
          summary: 'the prompt tokens POST /responses would send for the same body (packed as it would be; no upstream call, nothing saved)',
          security: tenantAndProvider,
          requestBody: { required: true, content: { 'application/json': { schema: ref('ResponseRequest') } } },
          responses: { '200': json(ref('InputTokens'), 'the count'), ...errors(400, 401, 404, 413, 429, 502, 503, 504) },
        }),
      },
      '/api/v1/responses/{id}': {
        get: op({ summary: 'a stored response', security: tenantOnly, parameters: [idParam('id', 'response id')], responses: { '200': json(ref('Response'), 'the response'), ...errors(401, 404) } }),
        delete: op({ summary: 'delete a stored response', security: tenantOnly, parameters: [idParam('id', 'response id')], responses: { '200': json(deleted('response'), 'deleted'), ...errors(401, 404) } }),
      },
      '/api/v1/responses/{id}/input_items': {
        get: op({
          summary: "a stored response's input items",
          security: tenantOnly,
          parameters: [idParam('id', 'response id'), queryParam('order', { enum: ['asc', 'desc'] }, 'order'), queryParam('limit', { type: 'integer' }, 'page size'), queryParam('after', { type: 'string' }, 'cursor'), queryParam('before', { type: 'string' }, 'cursor')],
          responses: { '200': json(list(ref('Item')), 'items'), ...errors(400, 401, 404) },
        }),
      },
      '/api/v1/responses/{id}/cancel': {
        post: op({ summary: 'cancel (always a 400: nothing runs in the background)', security: tenantOnly, parameters: [idParam('id', 'response id')], responses: errors(400, 401, 404) }),
      },
      '/api/v1/conversations': {
        post: op({ summary: 'create a conversation (a session)', security: tenantOnly, requestBody: { content: { 'application/json': { schema: { type: 'object', properties: { items: { type: 'array' }, metadata: { type: 'object' } } } } } }, responses: { '200': json(ref('Conversation'), 'created'), ...errors(400, 401) } }),
      },
      '/api/v1/conversations/{id}': {
        get: op({ summary: 'a conversation', security: tenantOnly, parameters: [idParam('id', 'conversation id')], responses: { '200': json(ref('Conversation'), 'the conversation'), ...errors(401, 404) } }),
        post: op({ summary: "update a conversation's metadata", security: tenantOnly, parameters: [idParam('id', 'conversation id')], requestBody: { content: { 'application/json': { schema: { type: 'object', properties: { metadata: { type: 'object' } } } } } }, responses: { '200': json(ref('Conversation'), 'updated'), ...errors(400, 401, 404) } }),
        delete: op({ summary: 'delete a conversation and its session', security: tenantOnly, parameters: [idParam('id', 'conversation id')], responses: { '200': json(deleted('conversation.deleted'), 'deleted'), ...errors(401, 404) } }),
      },
      '/api/v1/conversations/{id}/items': {
        get: op({ summary: "a conversation's items", security: tenantOnly, parameters: [idParam('id', 'conversation id')], responses: { '200': json(list(ref('Item')), 'items'), ...errors(400, 401, 404) } }),
        post: op({ summary: 'add items', security: tenantOnly, parameters: [idParam('id', 'conversation id')], requestBody: { content: { 'application/json': { schema: { type: 'object', properties: { items: { type: 'array' } } } } } }, responses: { '200': json(list(ref('Item')), 'the added items'), ...errors(400, 401, 404) } }),
      },
      '/api/v1/conversations/{id}/items/{item}': {
        get: op({ summary: 'one item', security: tenantOnly, parameters: [idParam('id', 'conversation id'), idParam('item', 'item id')], responses: { '200': json(ref('Item'), 'the item'), ...errors(401, 404) } }),
        delete: op({ summary: 'delete one item', security: tenantOnly, parameters: [idParam('id', 'conversation id'), idParam('item', 'item id')], responses: { '200': json(ref('Conversation'), 'the conversation'), ...errors(401, 404) } }),
      },
      '/api/v1/sessions': {
        get: op({ summary: 'your sessions, newest first (by creation time), a page at a time', security: tenantOnly, parameters: [queryParam('limit', { type: 'integer', minimum: 1, maximum: 100 }, 'page size'), queryParam('after', { type: 'string' }, 'the previous page\'s last id')], responses: { '200': json(ref('SessionList'), 'sessions'), ...errors(400, 401) } }),
      },
      '/api/v1/sessions/{id}': {
        get: op({ summary: 'a session and its messages', security: tenantOnly, parameters: [idParam('id', 'session id')], responses: { '200': json(ref('Session'), 'the session'), ...errors(401, 404) } }),
        delete: op({ summary: 'delete a session for good', security: tenantOnly, parameters: [idParam('id', 'session id')], responses: { '200': json(deleted('session'), 'deleted'), ...errors(401, 404) } }),
      },
      '/api/v1/files': {
        post: op({
          summary: 'upload a file into your knowledge base (ingested before the answer)',
          security: tenantOnly,
          requestBody: { required: true, content: { 'multipart/form-data': { schema: { type: 'object', properties: { file: { type: 'string', format: 'binary' }, metadata: { type: 'string' } } } }, 'application/json': { schema: { type: 'object', required: ['filename', 'content'], properties: { filename: { type: 'string' }, content: { type: 'string' }, metadata: { type: 'object' } } } } } },
          responses: { '201': json(ref('File'), 'stored'), ...errors(400, 401, 403, 413, 415, 422, 507) },
        }),
        get: op({
          summary: 'your files, newest first, in pages as OpenAI lists them (limit 1–10,000, default 10,000)',
          security: tenantOnly,
          parameters: [
            queryParam('order', { enum: ['asc', 'desc'] }, 'order by creation, default desc'),
            queryParam('limit', { type: 'integer', minimum: 1, maximum: 10000 }, 'page size'),
            queryParam('after', { type: 'string' }, 'cursor: the last file id of the previous page'),
            queryParam('purpose', { type: 'string' }, 'accepted and ignored: every file here is one kind'),
          ],
          responses: { '200': json(list(ref('File')), 'files'), ...errors(400, 401) },
        }),
      },
      '/api/v1/files/search': {
        post: op({ summary: 'search your knowledge base', security: tenantOnly, requestBody: { required: true, content: { 'application/json': { schema: { type: 'object', required: ['query'], properties: { query: { type: 'string' }, k: { type: 'integer', minimum: 1, maximum: 100 } } } } } }, responses: { '200': json(list(ref('SearchResult')), 'results'), ...errors(400, 401) } }),
      },
      '/api/v1/files/{id}': {
        get: op({ summary: 'one file', security: tenantOnly, parameters: [idParam('id', 'file id')], responses: { '200': json(ref('File'), 'the file'), ...errors(401, 404) } }),
        delete: op({ summary: 'delete a file and its chunks', security: tenantOnly, parameters: [idParam('id', 'file id')], responses: { '200': json(deleted('file'), 'deleted'), ...errors(401, 404) } }),
      },
      '/api/v1/files/{id}/content': {
        get: op({ summary: 'the text extracted from a file (not the uploaded bytes)', security: tenantOnly, parameters: [idParam('id', 'file id')], responses: { '200': { description: 'the extracted text', content: { 'text/plain': { schema: { type: 'string' } } } }, ...errors(401, 404) } }),
      },
      '/api/v1/models': {
        get: op({ summary: "the upstream's model list (cached)", security: tenantAndProvider, responses: { '200': json(list(ref('Model')), 'models'), ...errors(401, 502) } }),
      },
      '/api/v1/models/{id}': {
        get: op({ summary: 'one model from the cached list', security: tenantAndProvider, parameters: [idParam('id', 'model id, e.g. openai%2Fgpt-4o')], responses: { '200': json(ref('Model'), 'the model'), ...errors(401, 404, 502) } }),
      },
      '/api/v1/models/{vendor}/{name}': {
        get: op({ summary: 'one model from the cached list, its id sent with the slash as it is (openai/gpt-4o)', security: tenantAndProvider, parameters: [idParam('vendor', 'the id before its slash, e.g. openai'), idParam('name', 'the id after its slash, e.g. gpt-4o')], responses: { '200': json(ref('Model'), 'the model'), ...errors(401, 404, 502) } }),
      },
      '/api/v1/embeddings': {
        post: op({ summary: "embeddings, relayed to the upstream's /embeddings", security: tenantAndProvider, requestBody: { required: true, content: { 'application/json': { schema: ref('EmbeddingRequest') } } }, responses: { '200': json(ref('EmbeddingList'), 'embeddings'), ...errors(400, 401, 413, 429, 502, 504) } }),
      },
      '/api/v1/usage': {
        get: op({
          summary: 'your usage per model per UTC day',
          security: tenantOnly,
          parameters: [queryParam('from', { type: 'string', format: 'date' }, 'first day, inclusive'), queryParam('to', { type: 'string', format: 'date' }, 'last day, inclusive')],
          responses: {
            '200': json(
              {
                type: 'object',
                required: ['object', 'data', 'plan', 'quotas'],
                properties: {
                  object: { const: 'list' },
                  data: { type: 'array', items: ref('UsageRow') },
                  plan: { type: 'string', enum: [...PLANS] },
                  quotas: {
                    type: 'object',
                    description: "each of your plan's quotas: its limit (null: none) and what is in use (messages_per_session: your largest session)",
                    additionalProperties: { type: 'object', required: ['limit', 'used'], properties: { limit: { type: ['integer', 'null'] }, used: { type: 'integer' } } },
                  },
                },
              },
              'usage rows, by date then model, and your quotas',
            ),
            ...errors(400, 401),
          },
        }),
      },
      '/api/v1/requests': {
        get: op({ summary: 'your recent request traces', security: tenantOnly, parameters: [queryParam('limit', { type: 'integer', minimum: 1, maximum: 1000 }, 'how many')], responses: { '200': json(list(ref('RequestTrace')), 'traces, newest first'), ...errors(400, 401) } }),
      },
      '/api/v1/admin/keys': {
        get: op({ summary: 'every service key (hashes never)', security: adminOnly, responses: { '200': json(list(ref('ServiceKey')), 'keys'), ...errors(401, 404) } }),
        post: op({ summary: 'create a key for a new tenant (the raw key is in this answer only)', security: adminOnly, requestBody: { content: { 'application/json': { schema: { type: 'object', properties: { plan: { enum: ['free', 'pro', 'premium', 'enterprise', 'unlimited'], default: 'pro' }, label: { type: 'string', maxLength: 200 } } } } } }, responses: { '201': json(ref('ServiceKey'), 'the new key, with `key`'), ...errors(400, 401, 404) } }),
      },
      '/api/v1/admin/keys/{id}': {
        get: op({ summary: 'one key', security: adminOnly, parameters: [idParam('id', 'key id')], responses: { '200': json(ref('ServiceKey'), 'the key'), ...errors(401, 404) } }),
        post: op({ summary: "move a key to another plan (its tenant's data stays)", security: adminOnly, parameters: [idParam('id', 'key id')], requestBody: { required: true, content: { 'application/json': { schema: { type: 'object', required: ['plan'], properties: { plan: { enum: ['free', 'pro', 'premium', 'enterprise', 'unlimited'] } } } } } }, responses: { '200': json(ref('ServiceKey'), 'the key'), ...errors(400, 401, 404) } }),
        delete: op({ summary: 'revoke a key: it answers 401 key_revoked from now on', security: adminOnly, parameters: [idParam('id', 'key id')], responses: { '200': json(ref('ServiceKey'), 'the revoked key'), ...errors(401, 404) } }),
      },
      '/api/v1/admin/keys/{id}/rotate': {
        post: op({ summary: 'a new secret for the same tenant and plan; the old key is revoked at once', security: adminOnly, parameters: [idParam('id', 'key id')], responses: { '201': json(ref('ServiceKey'), 'the new key, with `key`'), ...errors(401, 404) } }),
      },
      '/api/v1/requests/{id}': {
        get: op({ summary: 'one request trace by its x-request-id', security: tenantOnly, parameters: [idParam('id', 'x-request-id')], responses: { '200': json(ref('RequestTrace'), 'the trace'), ...errors(401, 404) } }),
      },
    },
  }
}

/** GET /openapi.json: no key, like /healthz; serialized once. */
export function openApiHandler(): Handler {
  const text = JSON.stringify(openApiDocument())
  return async (ctx) => sendJsonText(ctx.res, 200, text)
}
