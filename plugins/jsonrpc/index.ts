/**
 * `jsonrpc` (handler): a JSON-RPC 2.0 front for the privacy network's node. It validates every
 * call, offers only allow-listed methods, maps neutral method names (`privnet_ledgerVersion`) to
 * the node's, composes `privnet_chainInfo` (which the node lacks) and answers batches entry by
 * entry in input order. It also provides the `jsonrpc` error format for the route.
 *
 * A handler, not a forwarding plugin, because composing chainInfo needs several node calls merged
 * into one answer, possibly inside a client batch next to forwarded calls; and because the gateway
 * renumbers ids for the node (see upstream-call.ts), which means reading the node's answer anyway.
 *
 * Two routes share the path: POST (`form: post`, JSON body, batches) and GET (`form: get`, the
 * call in the query, see get-form.ts). The form decides whether the core reads a body.
 *
 * Call-level problems are JSON-RPC answers with HTTP 200 (as the node and other JSON-RPC servers
 * answer them); problems with the HTTP request as a whole are gateway errors with their own HTTP
 * status, rendered by the `jsonrpc` error format.
 */
import type { PluginDefinition, RequestContext } from '../../core/proxy/plugin-api.ts'
import { GatewayError } from '../../core/proxy/plugin-api.ts'
import { answer, readEntry, rpcError, type Answer, type Entry } from './calls.ts'
import type { ChainInfoConfig } from './chain-info.ts'
import { dispatch, type MethodTable } from './dispatch.ts'
import { jsonRpcErrorFormat } from './error-format.ts'
import { readQueryCall } from './get-form.ts'
import { createSender, type CoalesceOptions, type Exchange } from './upstream-call.ts'
import { coalescedCounter, InFlight } from '../_shared/coalesce.ts'

export interface JsonRpcConfig {
  upstream: string
  path: string
  form: 'post' | 'get'
  maxBatch: number
  maxResponseBytes: number
  allow: string[]
  aliases: Record<string, string>
  chainInfo?: ChainInfoConfig
  readOnly: string[]
  coalesce: boolean
}

/** Exchanges in flight, shared by every jsonrpc route (keys hold the upstream, its URL and path). */
const IN_FLIGHT = new InFlight<Exchange>()

const methodName = { type: 'string', pattern: '^[A-Za-z0-9_.:-]+$' }

/** What the request carries: one entry, or a batch of them; or an answer already decided. */
type Parsed = { batch: boolean; entries: Entry[] } | { early: Answer }

function readPost(ctx: RequestContext, maxBatch: number): Parsed {
  const value = ctx.body?.json
  if (value === undefined) throw new GatewayError(400, 'invalid_json', 'request body is empty; expected a JSON-RPC call or batch')
  if (!Array.isArray(value)) return { batch: false, entries: [readEntry(value)] }
  if (value.length === 0) return { early: answer(null, { error: rpcError('invalidRequest', 'a batch must hold at least one call') }) }
  if (value.length > maxBatch) throw new GatewayError(400, 'batch_too_large', `batch has ${value.length} calls; the limit is ${maxBatch}`)
  return { batch: true, entries: value.map(readEntry) }
}

function noContent(ctx: RequestContext): void {
  ctx.respond(204, Buffer.alloc(0))
  delete ctx.response!.headers['content-type']
}

const jsonRpc: PluginDefinition<JsonRpcConfig> = {
  name: 'jsonrpc',
  version: '1.0.0',
  priority: 0,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['upstream'],
    properties: {
      upstream: { type: 'string', minLength: 1, description: 'Node JSON-RPC upstream.' },
      path: { type: 'string', pattern: '^/', default: '/', description: 'Path calls are posted to on the upstream.' },
      form: {
        enum: ['post', 'get'],
        default: 'post',
        description: 'Request form this route answers: post (JSON body, batches) or get (call in the query string).',
      },
      maxBatch: { type: 'integer', minimum: 1, maximum: 1000, default: 100, description: 'Most calls in one batch; more answers 400 batch_too_large.' },
      maxResponseBytes: { type: 'integer', minimum: 1024, default: 8388608, description: "Cap on the node's answer; past it 502." },
      allow: { type: 'array', uniqueItems: true, items: methodName, default: [], description: 'Node methods clients may call under their own names.' },
      aliases: {
        type: 'object',
        additionalProperties: methodName,
        propertyNames: methodName,
        default: {},
        description: 'Client-facing method name → node method name (e.g. privnet_ledgerVersion: midnight_ledgerVersion).',
      },
      readOnly: {
        type: 'array',
        uniqueItems: true,
        items: methodName,
        default: [],
        description:
          'Node methods (as sent to the node, after aliases) that only read. A request made only of these may be retried on another target of the upstream pool after a failure before the answer (connect error, reset, 502/503/504, 429), and identical ones in flight share one node request (coalesce). ' +
          'A method left out is treated as a write: sent once, never coalesced.',
      },
      coalesce: {
        type: 'boolean',
        default: true,
        description:
          'Identical requests in flight at the same time whose calls are all readOnly methods make one node request; each client gets the answer with its own ids and is charged as usual.',
      },
      chainInfo: {
        type: 'object',
        additionalProperties: false,
        description: 'The composed chain-info method. Omit to not offer it.',
        properties: {
          method: { ...methodName, default: 'privnet_chainInfo', description: 'Client-facing name of the composed method.' },
          ledgerVersionMethod: { ...methodName, default: 'midnight_ledgerVersion', description: 'Node method giving the ledger version.' },
          apiVersionsMethod: { ...methodName, default: 'midnight_apiVersions', description: 'Node method giving the API versions.' },
        },
      },
    },
  },
  needs: (config) => (config.form === 'post' ? { body: 'json' } : {}),
  errorFormats: { jsonrpc: jsonRpcErrorFormat },
  create(config, init) {
    if (!init.upstreamNames.includes(config.upstream)) throw new Error(`unknown upstream "${config.upstream}"`)
    const table: MethodTable = { allow: new Set(config.allow), aliases: config.aliases, chainInfo: config.chainInfo }
    const readOnly = new Set<string>(config.readOnly)
    const coalesced = coalescedCounter(init.metrics).labels(init.routeName)
    const pool = init.upstream(config.upstream)
    const coalesce: CoalesceOptions | undefined = config.coalesce && readOnly.size > 0
      ? { inFlight: IN_FLIGHT, readOnly, joined: () => { coalesced.inc(); pool.coalesced++ } }
      : undefined
    return {
      async handle(ctx) {
        const parsed: Parsed = config.form === 'get' ? { batch: false, entries: [readQueryCall(ctx.query)] } : readPost(ctx, config.maxBatch)
        if ('early' in parsed) return ctx.respond(200, parsed.early)
        const { batch, entries } = parsed
        ctx.logFields.rpcCalls = entries.length
        if (!batch && 'call' in entries[0]) ctx.logFields.rpcMethod = entries[0].call.method
        const send = createSender(ctx, { upstream: init.upstream(config.upstream), path: config.path, maxResponseBytes: config.maxResponseBytes, readOnly, coalesce })
        const answers = (await dispatch(entries, table, send)).filter((entry) => entry !== null)
        if (answers.length === 0) return noContent(ctx)
        ctx.respond(200, batch ? answers : answers[0])
      },
    }
  },
}

export default jsonRpc
