/**
 * Builds the runtime route table from a validated config: the router, each route's plugin chain
 * split by phase and sorted by priority, and the plugin instances. A table is immutable once
 * built; a reload builds a new one beside it and swaps.
 */
import type { Logger } from 'pino'
import type { GatewayConfig, PluginEntry, RouteConfig } from '../config/types.ts'
import type { ConfigIssue } from '../config/source.ts'
import { Router } from './router.ts'
import type { AdminHandler, BodyNeed, ErrorFormatter, PluginConfigError, PluginDefinition, PluginInit, PluginInstance, RequestContext } from './plugin.ts'
import { ProjectDirectory, type Project, type Scope } from '../projects/projects.ts'
import type { Store } from '../store/types.ts'
import type { ProjectOverride } from '../store/settings/types.ts'
import { mergeProjects } from '../projects/project-settings.ts'
import type { UpstreamHandle } from './http/upstreams.ts'
import type { ForwardOptions } from './http/forward.ts'
import { credentialPolicy, type UpstreamCredentialPolicy } from './http/gateway-cookies.ts'
import { type CoreMetrics, RouteMetrics } from './metrics.ts'
import { collectErrorFormats, jsonErrorFormat } from './error-format.ts'
import { wellKnownRoutes } from './route-catalog.ts'

export type Step = (ctx: RequestContext) => void | Promise<void>

export interface CompiledRoute {
  name: string
  config: RouteConfig
  /** Pattern segments, for building the redacted path. */
  pattern: readonly string[]
  rewrite?: (params: Readonly<Record<string, string>>) => string
  handler?: PluginInstance
  request: Step[]
  body: Step[]
  response: Step[]
  done: Step[]
  bodyNeed?: BodyNeed
  /** Accepted request media types when the body is read (415 otherwise); empty = any. */
  contentTypes: string[]
  wantsResponseBody: boolean
  /** What of the client's credentials goes upstream, and whether the upstream's Set-Cookie comes back. */
  credentials: UpstreamCredentialPolicy
  maxBodyBytes: number
  /** Deadline for receiving the request body, from the request head (408 past it); 0 = none. */
  bodyTimeoutMs: number
  /** Path params plugins declared as credentials at load (`init.secretParam`). */
  secretParams: string[]
  /** The forwarder's options for a request that may be sent again and one that may not; made by pipeline.ts on first use. */
  forwarding?: { safe: ForwardOptions; unsafe: ForwardOptions }
  errorFormat: ErrorFormatter
  metrics: RouteMetrics
  /** Enabled plugins of the chain in run order, handler last (`tollgate routes`). */
  pluginNames: string[]
  /** What the route's plugin instances `describe()`d, by plugin name (route-catalog.ts). */
  descriptions: Map<string, unknown>
}

export interface AdminRoute {
  method: 'GET' | 'POST'
  path: string
  handler: AdminHandler
}

export interface Table {
  config: GatewayConfig
  router: Router<CompiledRoute>
  routes: CompiledRoute[]
  /** Projects in force: the seed merged with the run-time settings; refreshed in place when they change. */
  projects: ProjectDirectory
  /** gateway.yaml's projects, before run-time settings. */
  seedProjects: readonly Project[]
  instances: PluginInstance[]
  adminRoutes: AdminRoute[]
  /** Error format for a request no route took (404, bad path): by the longest `unmatched` prefix, else json. */
  unmatchedFormat(path: string): ErrorFormatter
  /** Requests still running on this table; it is closed when retired and this reaches 0. */
  inFlight: number
  retired: boolean
}

export interface BuildDeps {
  log: Logger
  metrics: CoreMetrics
  store: Store
  upstreams: ReadonlyMap<string, UpstreamHandle>
  plugins: Map<string, PluginDefinition>
  /** Run-time overrides of the projects (store settings), merged over the config's projects. */
  projectOverrides?: readonly ProjectOverride[]
  /** Source position of a config path, for build errors. */
  locate(path: readonly (string | number)[]): { line: number; column: number }
}

export function toProjects(config: GatewayConfig): Project[] {
  return config.projects.map((p) => ({
    id: p.id,
    name: p.name ?? p.id,
    plan: p.plan,
    scopes: new Set(p.scopes as Scope[]),
    credits: p.credits,
    features: p.features,
    secretHash: p.secretHash,
    keys: p.keys.map((k) => ({ label: k.label, hash: k.hash, disabled: k.disabled, expiresAt: k.expiresAt ? Date.parse(k.expiresAt) : undefined })),
    settings: p.settings,
  }))
}

/**
 * A route's `rewrite` as a function of its params, built once per config. A template without params
 * (`/prove-tx`, where a key-in-path route forwards to) is one text made here: per request it was an
 * array of parts mapped and joined (~1k instructions). With params, only they are read and encoded
 * per request, the rest is fixed text.
 */
export function compileRewrite(template: string): (params: Readonly<Record<string, string>>) => string {
  const parts = template.split('/')
  if (!parts.some((part) => part.startsWith(':') || part.startsWith('*'))) {
    const fixed = template || '/'
    return () => fixed
  }
  const steps = parts.map((part): ((p: Readonly<Record<string, string>>) => string) => {
    const name = part.slice(1)
    if (part.startsWith(':')) return (p) => encodeURIComponent(p[name] ?? '')
    if (part.startsWith('*')) return (p) => (p[name] ?? '').split('/').map(encodeURIComponent).join('/')
    return () => part
  })
  return (params) => {
    let path = steps[0]!(params)
    for (let i = 1; i < steps.length; i++) path += '/' + steps[i]!(params)
    return path || '/'
  }
}

export async function buildTable(config: GatewayConfig, deps: BuildDeps): Promise<{ table?: Table; issues: ConfigIssue[] }> {
  const issues: ConfigIssue[] = []
  const seedProjects = toProjects(config)
  const projects = new ProjectDirectory(mergeProjects(seedProjects, deps.projectOverrides ?? []))
  const instances: PluginInstance[] = []
  const adminRoutes: AdminRoute[] = []
  const formats = collectErrorFormats(deps.plugins)
  const fail = (entry: PluginEntry | undefined, route: RouteConfig | undefined, message: string, inner?: readonly (string | number)[]) => {
    const at = entry && inner ? [...entry.path, 'config', ...inner] : (entry?.path ?? route?.configPath ?? [])
    const issue = { file: config.file.split('/').pop()!, ...deps.locate(at), path: at, subject: entry?.name, message }
    // The routes of one template (`each`) share its block: its mistake is reported once.
    if (!issues.some((seen) => seen.line === issue.line && seen.column === issue.column && seen.message === issue.message)) issues.push(issue)
  }

  const instantiate = async (entry: PluginEntry, route: RouteConfig, secretParams: string[]): Promise<PluginInstance | undefined> => {
    const init: PluginInit = {
      routeName: route.name,
      routeParams: (route.path.match(/[:*][A-Za-z0-9_]+/g) ?? []).map((p) => p.slice(1)),
      route: {
        path: route.path,
        rewrite: route.rewrite,
        upstream: route.upstream,
        apiType: route.apiType,
        plugins: route.plugins.filter((e) => e.enabled).map((e) => ({ name: e.name, config: e.config })),
        ...(route.handler ? { handler: { name: route.handler.name, config: route.handler.config } } : {}),
      },
      log: deps.log.child({ plugin: entry.name, route: route.name }),
      metrics: deps.metrics.registry,
      store: deps.store,
      projects,
      upstream(name) {
        const handle = deps.upstreams.get(name)
        if (!handle) throw new Error(`unknown upstream "${name}"`)
        return handle
      },
      upstreamNames: [...deps.upstreams.keys()],
      configDir: config.dir,
      secretParam(name) {
        if (!secretParams.includes(name)) secretParams.push(name)
      },
      adminRoute(method, path, handler) {
        if (!adminRoutes.some((r) => r.method === method && r.path === path)) adminRoutes.push({ method, path, handler })
      },
    }
    try {
      const instance = await entry.definition.create(entry.config, init)
      instances.push(instance)
      return instance
    } catch (error) {
      fail(entry, route, (error as Error).message, (error as Partial<PluginConfigError>).configPath)
      return undefined
    }
  }

  const routes: CompiledRoute[] = []
  for (const route of config.routes) {
    const entries = [...config.plugins, ...route.plugins]
      .filter((entry) => entry.enabled)
      .map((entry, order) => ({ entry, order }))
      .sort((a, b) => b.entry.definition.priority - a.entry.definition.priority || a.order - b.order)
      .map(({ entry }) => entry)
    const compiled: CompiledRoute = {
      name: route.name,
      config: route,
      pattern: route.path.split('/').filter(Boolean),
      rewrite: route.rewrite ? compileRewrite(route.rewrite) : undefined,
      request: [],
      body: [],
      response: [],
      done: [],
      contentTypes: [],
      wantsResponseBody: false,
      credentials: credentialPolicy(route),
      maxBodyBytes: route.maxBodyBytes ?? config.server.limits.maxBodyBytes,
      bodyTimeoutMs: bodyDeadline(route, config),
      secretParams: [],
      errorFormat: formats.get(route.errorFormat) ?? jsonErrorFormat,
      metrics: new RouteMetrics(deps.metrics, route.name),
      pluginNames: [],
      descriptions: new Map(),
    }
    const all = route.handler ? [...entries, route.handler] : entries
    for (const entry of all) {
      const instance = await instantiate(entry, route, compiled.secretParams)
      if (!instance) continue
      compiled.pluginNames.push(entry.name)
      if (instance.describe) {
        try {
          compiled.descriptions.set(entry.name, instance.describe())
        } catch (error) {
          fail(entry, route, (error as Error).message)
        }
      }
      const needs = entry.definition.needs?.(entry.config) ?? {}
      if (needs.body === 'json' || (needs.body === 'raw' && compiled.bodyNeed === undefined)) compiled.bodyNeed = needs.body
      if (needs.contentTypes) compiled.contentTypes.push(...needs.contentTypes)
      if (needs.responseBody) compiled.wantsResponseBody = true
      if (entry === route.handler) {
        if (!instance.handle) fail(entry, route, 'this plugin cannot be a route handler (it has no handle phase)')
        compiled.handler = instance
        continue
      }
      if (instance.request) compiled.request.push(instance.request.bind(instance))
      if (instance.body) compiled.body.push(instance.body.bind(instance))
      if (instance.response) compiled.response.push(instance.response.bind(instance))
      if (instance.done) compiled.done.push(instance.done.bind(instance))
    }
    // A request that may be sent again needs its body in memory: a streamed body can be sent once.
    if (route.idempotent && route.upstream && compiled.bodyNeed === undefined) compiled.bodyNeed = 'raw'
    routes.push(compiled)
  }

  let router: Router<CompiledRoute> | undefined
  try {
    // Documents plugins build from the table (the x402 manifest) are routes of it: they follow reloads.
    const served = [...routes, ...wellKnownRoutes(routes, deps.plugins, deps.metrics)]
    router = new Router(served.map((route) => ({ methods: route.config.methods, path: route.config.path, value: route })))
  } catch (error) {
    fail(undefined, undefined, `routes: ${(error as Error).message}`)
  }
  if (issues.length || !router) {
    await Promise.allSettled(instances.map((instance) => instance.close?.()))
    return { issues }
  }
  return {
    issues,
    table: { config, router, routes, projects, seedProjects, instances, adminRoutes, unmatchedFormat: unmatchedFormats(config, formats), inFlight: 0, retired: false },
  }
}

function unmatchedFormats(config: GatewayConfig, formats: Map<string, ErrorFormatter>): (path: string) => ErrorFormatter {
  const byPrefix = [...config.unmatched]
    .sort((a, b) => b.prefix.length - a.prefix.length)
    .map((entry) => ({ prefix: entry.prefix, format: formats.get(entry.errorFormat) ?? jsonErrorFormat }))
  return (path) => byPrefix.find((entry) => path.startsWith(entry.prefix))?.format ?? jsonErrorFormat
}

/** Closes a retired table's plugin instances once its last request is done. */
export async function closeTable(table: Table): Promise<void> {
  await Promise.allSettled(table.instances.map((instance) => instance.close?.()))
}

/**
 * A route's body deadline: its own, else the short one for small-body routes (a 1 MiB body in
 * 30 s needs only 35 KB/s), else the server's whole-request timeout (proofs may be large).
 */
function bodyDeadline(route: RouteConfig, config: GatewayConfig): number {
  if (route.bodyTimeoutMs !== undefined) return route.bodyTimeoutMs
  const limits = config.server.limits
  const cap = route.maxBodyBytes ?? limits.maxBodyBytes
  return cap <= limits.smallBodyBytes ? limits.bodyTimeoutMs : limits.requestTimeoutMs
}
