/**
 * Loads gateway.yaml: parse with positions, interpolate, validate the core schema, load custom
 * plugins, validate each plugin entry against its plugin's schema, then cross-check references.
 * Returns every issue found, never the first only, and never a stack trace.
 *
 * @example
 * ```ts
 * const result = await loadConfig('gateway.yaml')
 * if (!result.config) for (const issue of result.issues) console.error(formatIssue(issue))
 * ```
 */
import { normaliseUpstream, type RawUpstream, type UpstreamConfig } from '../proxy/upstream/config.ts'
import { createHash } from 'node:crypto'
import { dirname, resolve } from 'node:path'
import { BlockList } from 'node:net'
import type { Ajv } from 'ajv'
import { ConfigSource, type ConfigIssue, type ConfigPath } from './source.ts'
import { projectSchema } from './projects-schema.ts'
import { coreSchema } from './schema.ts'
import { compileOnce, createConfigAjv, explain } from './ajv-messages.ts'
import { expandRoutes, unusedInName } from './each.ts'
import { builtinPlugins, loadCustomPlugin } from '../proxy/plugin-registry.ts'
import { collectErrorFormats } from '../proxy/error-format.ts'
import { addTrustedProxy } from '../proxy/http/client-address.ts'
import type { JsonSchema, PluginDefinition } from '../proxy/plugin.ts'
import type { GatewayConfig, PluginEntry, ProjectConfig, RouteConfig } from './types.ts'

export interface LoadResult {
  config?: GatewayConfig
  issues: ConfigIssue[]
  plugins: Map<string, PluginDefinition>
  /** Source position of a config path (for errors found later, when building). */
  locate(path: ConfigPath): { line: number; column: number }
}

function validateInto(source: ConfigSource, ajv: Ajv, schema: JsonSchema, value: unknown, base: ConfigPath, subject?: (path: ConfigPath) => { path: ConfigPath; subject?: string }): boolean {
  const validate = compileOnce(ajv, schema)
  if (validate(value)) return true
  for (const problem of explain(validate.errors)) {
    const full = [...base, ...problem.path]
    const labelled = subject ? subject(problem.path) : { path: full }
    const position = source.locate(full, problem.atKey)
    source.report({ file: source.label, ...position, path: labelled.path, subject: labelled.subject, message: problem.message })
  }
  return false
}

function loadProjects(source: ConfigSource, ajv: Ajv, raw: any, env: NodeJS.ProcessEnv): { projects: ProjectConfig[]; extra: ConfigSource | undefined } {
  if (!raw.projectsFile) return { projects: raw.projects, extra: undefined }
  const file = resolve(dirname(source.file), raw.projectsFile)
  let extra: ConfigSource
  try {
    extra = new ConfigSource(file, env)
  } catch (error) {
    source.issue(['projectsFile'], `cannot read ${raw.projectsFile}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`)
    return { projects: raw.projects, extra: undefined }
  }
  const list = (extra.value as any)?.projects
  if (extra.issues.length === 0) {
    if (!Array.isArray(list)) extra.issue([], 'must have a `projects` list')
    else list.forEach((project: unknown, i: number) => validateInto(extra, ajv, projectSchema, project, ['projects', i]))
  }
  return { projects: [...raw.projects, ...(Array.isArray(list) ? list : [])], extra }
}

function pluginEntries(
  source: ConfigSource,
  ajv: Ajv,
  plugins: Map<string, PluginDefinition>,
  entries: any[],
  base: ConfigPath,
): PluginEntry[] {
  const out: PluginEntry[] = []
  entries.forEach((entry, i) => {
    const path = [...base, i]
    const definition = plugins.get(entry.name)
    if (!definition) {
      source.issue([...path, 'name'], `unknown plugin "${entry.name}" (known: ${[...plugins.keys()].join(', ')})`)
      return
    }
    const config = entry.config ?? {}
    const ok = validateInto(source, ajv, definition.configSchema, config, [...path, 'config'], (inner) => ({
      path,
      subject: [definition.name, ...inner].reduce<string>((acc, part) => (typeof part === 'number' ? `${acc}[${part}]` : `${acc}.${part}`), '').slice(1),
    }))
    if (ok) out.push({ name: entry.name, config, enabled: entry.enabled !== false, path, definition })
  })
  return out
}

function crossCheck(source: ConfigSource, config: GatewayConfig, rawRoutes: any[], formats: Set<string>): void {
  const proxies = config.server.trustProxy
  if (Array.isArray(proxies)) {
    const list = new BlockList()
    proxies.forEach((entry, i) => {
      const problem = addTrustedProxy(list, entry)
      if (problem) source.issue(['server', 'trustProxy', i], problem)
    })
  }
  rawRoutes.forEach((route, i) => {
    const unused = unusedInName(route)
    if (unused.length) source.issue(['routes', i, 'name'], `must use every \`each\` variable (${unused.map((v) => `{${v}}`).join(', ')}), so the expanded routes get distinct names`)
  })
  config.unmatched.forEach((entry, i) => {
    if (!formats.has(entry.errorFormat)) source.issue(['unmatched', i, 'errorFormat'], `unknown error format "${entry.errorFormat}" (known: ${[...formats].join(', ')})`)
  })
  const names = new Map<string, unknown>()
  config.routes.forEach((route) => {
    const at = route.configPath
    if (/[{}]/.test(route.name)) source.issue([...at, 'name'], `"${route.name}" has braces that name no \`each\` variable`)
    // Copies of one template sharing a name were reported above, by unusedInName.
    else if (names.has(route.name) && names.get(route.name) !== at[1]) source.issue([...at, 'name'], `duplicate route name "${route.name}"`)
    names.set(route.name, at[1])
    const hasHandler = rawRoutes[at[1] as number].handler !== undefined
    if (!route.upstream === !hasHandler) source.issue(at, 'a route needs exactly one of `upstream` or `handler`')
    if (route.upstream && !config.upstreams[route.upstream]) source.issue([...at, 'upstream'], `unknown upstream "${route.upstream}"`)
    if (!formats.has(route.errorFormat)) source.issue([...at, 'errorFormat'], `unknown error format "${route.errorFormat}" (known: ${[...formats].join(', ')})`)
    const params = new Set((route.path.match(/[:*][A-Za-z0-9_]+/g) ?? []).map((p) => p.slice(1)))
    for (const used of route.rewrite?.match(/[:*][A-Za-z0-9_]+/g) ?? []) {
      if (!params.has(used.slice(1))) source.issue([...at, 'rewrite'], `rewrite uses ${used}, which the path does not define`)
    }
  })
}


/** Every upstream has exactly one of `url` or `targets`; both forms become a pool (core/proxy/upstream/config.ts). */
function upstreamsOf(source: ConfigSource, raw: Record<string, RawUpstream>): Record<string, UpstreamConfig> {
  const out: Record<string, UpstreamConfig> = {}
  for (const [name, upstream] of Object.entries(raw)) {
    if ((upstream.url === undefined) === (upstream.targets === undefined)) source.issue(['upstreams', name], 'an upstream needs exactly one of `url` or `targets`')
    const names = new Set<string>()
    upstream.targets?.forEach((target, i) => {
      const label = target.name ?? String(i)
      if (names.has(label)) source.issue(['upstreams', name, 'targets', i, 'name'], `duplicate target name "${label}"`)
      names.add(label)
    })
    if (upstream.preferZone !== undefined && !upstream.targets?.some((t) => t.zone === upstream.preferZone)) {
      source.issue(['upstreams', name, 'preferZone'], `no target has zone "${upstream.preferZone}"`)
    }
    const health = upstream.health
    if (health?.baseEjectionMs !== undefined && health.maxEjectionMs !== undefined && health.maxEjectionMs < health.baseEjectionMs) {
      source.issue(['upstreams', name, 'health', 'maxEjectionMs'], 'must be at least baseEjectionMs')
    }
    out[name] = normaliseUpstream(upstream)
  }
  return out
}

export async function loadConfig(file: string, env: NodeJS.ProcessEnv = process.env): Promise<LoadResult> {
  const absolute = resolve(file)
  let source: ConfigSource
  try {
    source = new ConfigSource(absolute, env)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message
    return { issues: [{ file, line: 1, column: 1, path: [], message: `cannot read config: ${code}` }], plugins: new Map(), locate: () => ({ line: 1, column: 1 }) }
  }
  const plugins = new Map(await builtinPlugins())
  const locate = (path: ConfigPath) => source.locate(path)
  if (source.issues.length) return { issues: source.issues, plugins, locate }

  const ajv = createConfigAjv()
  const raw = source.value as any
  if (!validateInto(source, ajv, coreSchema, raw, [])) return { issues: source.issues, plugins, locate }

  for (const [i, custom] of (raw.customPlugins as { path: string }[]).entries()) {
    try {
      const definition = await loadCustomPlugin(dirname(absolute), custom.path)
      if (plugins.has(definition.name)) source.issue(['customPlugins', i, 'path'], `plugin name "${definition.name}" is already taken`)
      else plugins.set(definition.name, definition)
    } catch (error) {
      source.issue(['customPlugins', i, 'path'], `plugin failed to load: ${(error as Error).message}`)
    }
  }

  const { projects, extra } = loadProjects(source, ajv, raw, env)
  // Route templates (`each`) become ordinary routes here; errors point at the template's block.
  const routes: RouteConfig[] = expandRoutes(raw.routes).map(({ route, index: i }: { route: any; index: number }) => ({
    ...route,
    configPath: ['routes', i],
    handler: route.handler ? pluginEntries(source, ajv, plugins, [route.handler], ['routes', i, 'handler'])[0] : undefined,
    plugins: pluginEntries(source, ajv, plugins, route.plugins, ['routes', i, 'plugins']),
  }))
  const config: GatewayConfig = {
    ...raw,
    upstreams: upstreamsOf(source, raw.upstreams),
    projects,
    routes,
    plugins: pluginEntries(source, ajv, plugins, raw.plugins, ['plugins']),
    dir: dirname(absolute),
    file: absolute,
    hash: createHash('sha256').update(source.text).update(extra?.text ?? '').digest('hex'),
  }
  crossCheck(source, config, raw.routes, new Set(collectErrorFormats(plugins).keys()))
  const issues = [...source.issues, ...(extra?.issues ?? [])]
  return issues.length ? { issues, plugins, locate } : { config, issues, plugins, locate }
}
