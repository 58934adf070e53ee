/**
 * The plugin contract. Modelled on Kong's: a plugin has a name, a priority (higher runs first),
 * a JSON Schema for its config that is validated when gateway.yaml loads, and phase handlers.
 *
 * A plugin is a folder `plugins/<name>/` whose `index.ts` default-exports a {@link PluginDefinition}.
 * Custom plugins load from paths listed under `customPlugins` in gateway.yaml, with the same contract.
 * The core never imports a plugin: it discovers them.
 *
 * @example
 * ```ts
 * import type { PluginDefinition } from 'tollgate/plugin'
 * const addHeader: PluginDefinition<{ value: string }> = {
 *   name: 'add-header',
 *   priority: 800,
 *   configSchema: {
 *     type: 'object', additionalProperties: false, required: ['value'],
 *     properties: { value: { type: 'string', description: 'Value of x-added sent upstream.' } },
 *   },
 *   create: (config) => ({ request(ctx) { ctx.upstreamHeaders['x-added'] = config.value } }),
 * }
 * export default addHeader
 * ```
 */
import type { IncomingHttpHeaders } from 'node:http'
import type { Logger } from 'pino'
import type { Registry } from 'prom-client'
import type { GatewayError } from './errors.ts'
import type { Store } from '../store/types.ts'
import type { ProjectDirectory, Project, ApiKeyRecord } from '../projects/projects.ts'
import type { UpstreamHandle } from './http/upstreams.ts'

/** A JSON Schema object (draft 2020-12 subset that ajv understands). */
export type JsonSchema = Record<string, unknown>

/** How a plugin wants the request body: parsed JSON, or the raw bytes. */
export type BodyNeed = 'json' | 'raw'

/** Renders a GatewayError as an HTTP answer for a route (`errorFormat` in gateway.yaml). */
export type ErrorFormatter = (error: GatewayError, ctx: RequestContext | undefined) => {
  status: number
  headers: Record<string, string>
  body: string | Buffer
}

export interface PluginDefinition<Config = any> {
  /** kebab-case, unique; the name used in gateway.yaml. */
  name: string
  version?: string
  /** Higher runs first within a phase. Bands: auth 1000-1500, limits ~900, validation ~800, transforms ~700, observability < 100. */
  priority: number
  /** JSON Schema of `config`; every property carries a `description` and, where sensible, a `default`. */
  configSchema: JsonSchema
  /** What the plugin needs from the request body, decided per config. */
  needs?: (config: Config) => { body?: BodyNeed; responseBody?: boolean; contentTypes?: string[] }
  /** Error formats this plugin contributes, usable as `errorFormat: <name>` on a route. */
  errorFormats?: Record<string, ErrorFormatter>
  /**
   * A public document the plugin builds from what its instances `describe()` (the x402 discovery
   * manifest): served by the core at `GET /.well-known/<name>` whenever at least one route describes
   * itself with this plugin. See {@link WellKnownDocument}.
   */
  wellKnown?: WellKnownDocument
  /**
   * Turns a validated config into phase handlers. Called once per route entry per config build
   * (at start and on every reload), never per request. Throwing here fails the config.
   */
  create(config: Config, init: PluginInit): PluginInstance | Promise<PluginInstance>
}

/**
 * An error `create` may throw to point `tollgate check` at the field of the plugin's config at
 * fault (`['jsonrpc', 'methods', 'eth_cal']`) instead of the plugin entry.
 */
export class PluginConfigError extends Error {
  constructor(readonly configPath: readonly (string | number)[], message: string) {
    super(message)
  }
}

/** What a plugin gets when it is built. */
export interface PluginInit {
  /** Name of the route this instance serves (`*` for none). */
  routeName: string
  /** The route's path params, so a plugin can check at load that the param it reads exists. */
  routeParams: readonly string[]
  /**
   * The route as configured, so a plugin can refuse a config that would leak its credential param,
   * or one whose chain lacks a plugin it relies on (`plugins`: the route's enabled entries, in order).
   */
  route: {
    path: string; rewrite?: string; upstream?: string; apiType?: string
    plugins: readonly { name: string; config: Readonly<Record<string, unknown>> }[]
    /** The route's handler plugin as configured, so a plugin can cross-check its config against it (a price per method the handler offers). */
    handler?: { name: string; config: unknown }
  }
  log: Logger
  metrics: Registry
  store: Store
  projects: ProjectDirectory
  /** A named upstream's keep-alive pool, for handler plugins that call upstreams themselves. */
  upstream(name: string): UpstreamHandle
  /** Names of every configured upstream. */
  upstreamNames: readonly string[]
  /** Directory gateway.yaml lives in; relative paths in plugin config resolve against it. */
  configDir: string
  /**
   * Marks a path param of this route as a credential from the start of every request: it is
   * redacted in logs and never sent upstream, even when an earlier plugin rejects the request.
   */
  secretParam(name: string): void
  /** Registers a GET/POST route on the admin listener (token-protected). */
  adminRoute(method: 'GET' | 'POST', path: string, handler: AdminHandler): void
}

export type AdminHandler = (req: {
  params: Record<string, string>
  query: URLSearchParams
  body: unknown
}) => Promise<AdminAnswer> | AdminAnswer

/**
 * An admin handler's answer: a JSON body, or a string sent as is (text/plain unless `headers`
 * names another content type, e.g. text/csv for an export).
 */
export interface AdminAnswer {
  status?: number
  body: unknown
  headers?: Record<string, string>
}

/** A route as the route catalogue shows it, with what one plugin's instance said of it. */
export interface DescribedRoute {
  name: string
  methods: readonly string[]
  /** The path template as configured (`/weather/:city`). */
  path: string
  /** The value the plugin instance's `describe()` returned for this route. */
  description: unknown
}

/**
 * A document under `/.well-known/`, built from the route table: once per table (so it follows
 * reloads and cannot disagree with the instances that answer live), then per request only the
 * origin is filled in.
 */
export interface WellKnownDocument {
  /** File name under `/.well-known/`, e.g. `x402.json`. */
  name: string
  /** Called once per table with every route this plugin described, in table order. */
  build(routes: readonly DescribedRoute[]): (origin: string) => unknown
}

export interface PluginInstance {
  /**
   * What this instance tells the route catalogue about its route (prices, terms), read once per
   * table by `tollgate routes` and by the plugin's {@link WellKnownDocument}. Never per request.
   */
  describe?(): unknown
  /** Headers and params only: auth, gates, rate limit, credit reserve, cache lookup. */
  request?(ctx: RequestContext): void | Promise<void>
  /** The body has been read (and parsed, for `json`): validation, batch caps. */
  body?(ctx: RequestContext): void | Promise<void>
  /** A handler plugin answers the request instead of an upstream (route `handler:`). */
  handle?(ctx: RequestContext): void | Promise<void>
  /** Upstream (or handler) status and headers are known; `ctx.response.body` is set only for plugins that asked for it. */
  response?(ctx: RequestContext): void | Promise<void>
  /** Exactly once per request, after the answer finished or the client went away. Must not throw. */
  done?(ctx: RequestContext): void | Promise<void>
  /** Called when this instance's config is replaced or the gateway stops. */
  close?(): void | Promise<void>
}

/** The answer as it stands: plugins in `response` may change status, headers and (if asked) body. */
export interface ResponseState {
  status: number
  headers: Record<string, string | string[]>
  /** Present in `response` when some plugin of the chain declared `responseBody`. */
  body?: Buffer
}

/** Per-request state shared by the chain. */
export interface RequestContext {
  readonly id: string
  readonly method: string
  /** Normalised path (no query). Never log it raw: it may hold a key; use `redactedPath`. */
  readonly path: string
  readonly query: URLSearchParams
  readonly headers: IncomingHttpHeaders
  readonly clientIp: string
  readonly routeName: string
  readonly params: Readonly<Record<string, string>>
  /** Path with every credential-bearing param replaced by `***`; safe for logs. */
  redactedPath: string
  /** Set by an auth plugin. */
  project?: Project
  apiKey?: ApiKeyRecord
  /**
   * Set by an auth plugin that refused a key (scope, plan, disabled, expired: the key's project and
   * key; unknown: the reason alone), for the dashboard's refused-traffic view. Never sent to the
   * client; `ctx.project` stays unset.
   */
  refused?: { project?: Project; key?: ApiKeyRecord; reason: string }
  /** API type for metering and metrics (`PRIVNET_ZKPAAS`, `MIRROR`, ...); set by a plugin or the route. */
  apiType?: string
  /** Path params that carry credentials; forwarding never puts them upstream, logs redact them. */
  readonly secretParams: Set<string>
  /** Request headers that carry credentials; never forwarded, always redacted. */
  readonly secretHeaders: Set<string>
  /** The request body, once read. `json` is set when a plugin asked for JSON. */
  body?: { raw: Buffer; json?: unknown }
  /** Upstream chosen for forwarding; a plugin may switch it (TEE pool, relay). */
  upstream?: string
  /** Path sent upstream (after rewrite and param substitution); a plugin may change it. */
  upstreamPath?: string
  /** Query string sent upstream, without `?`; defaults to the client's. */
  upstreamQuery?: string
  /** Method sent upstream; defaults to the client's (the JSON-RPC GET form becomes a POST). */
  upstreamMethod?: string
  /** Extra or replaced headers for the upstream request. `null` removes a header. */
  upstreamHeaders: Record<string, string | null>
  /** Headers added to the client answer whatever the outcome (rate-limit headers, X-Cache...). */
  responseHeaders: Record<string, string>
  /** Filled once a status is known. */
  response?: ResponseState
  /** Upstream status, when an upstream answered. */
  upstreamStatus?: number
  /** The error that ended the request, if any. */
  error?: GatewayError
  /**
   * True when the upstream failed after the head of a streamed answer was written (reset, stall
   * past its body timeout, short body): the client got a cut answer; `error` says why.
   */
  truncated: boolean
  /** True when the client went away before the answer finished. */
  aborted: boolean
  /** Aborts when the client goes away; handler plugins pass it to their own upstream calls. */
  readonly signal: AbortSignal
  /** Monotonic start time (performance.now()). */
  readonly startedAt: number
  /** Time spent waiting on upstreams, ms. */
  upstreamMs?: number
  /** Per-plugin scratch space, keyed by plugin name (made on first read; a {@link RequestSlot} costs less). */
  readonly state: Map<string, unknown>
  /** `state.get(key)` without making the map on a request that has none. */
  stateValue(key: string): unknown
  /**
   * Ends the request with this answer; later phases up to `response` are skipped. Throws a
   * RangeError for a status outside 100–999 (the request then answers 500, as for a plugin that throws).
   */
  respond(status: number, body: unknown, headers?: Record<string, string>): void
  /** Fields added to this request's access log line (project id, item count...). */
  readonly logFields: Record<string, unknown>
}
