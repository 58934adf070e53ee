/**
 * The admin API over run-time project settings (token-protected, on the admin listener):
 *
 *   GET   /admin/projects                             effective projects (seed + overrides)
 *   GET   /admin/projects/:id
 *   POST  /admin/projects                             create a project that exists only in the store
 *   PATCH /admin/projects/:id                         plan, name, scopes, features, credits, secretHash
 *   POST  /admin/projects/:id/keys                    add a key by hash, or generate one (shown once)
 *   POST  /admin/projects/:id/keys/:label/disable     (and /enable)
 *   POST  /admin/projects/:id/reset                   drop the run-time overrides: the yaml is in force again
 *   GET   /admin/projects/:id/audit                   changes to the project, newest first
 *   GET   /admin/settings/audit                       every change, newest first
 *
 * A change answers after this instance's directory has it, so the next request here is judged by
 * it; other instances follow on the store's notification (or its backstop re-read).
 * Who made a change is the `x-admin-actor` header (default `admin`); it goes to the audit trail.
 */
import { randomBytes } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { GatewayError } from './errors.ts'
import { parseJson, readBody } from './http/body.ts'
import { hashCredential, SCOPES, type Project, type ProjectDirectory } from './projects.ts'
import { Router, normalisePath } from './router.ts'
import type { ProjectSettingsSync } from './project-settings.ts'
import { SettingsConflict, type FeatureFlags, type ProjectFields, type ProjectOverride, type SettingsStore } from './store/settings/types.ts'

export interface SettingsAdminDeps {
  settings: SettingsStore
  sync: ProjectSettingsSync
  /** The directory of the table in service. */
  projects(): ProjectDirectory
}

type Handler = (req: { params: Record<string, string>; query: URLSearchParams; body: unknown; actor: string }) => Promise<{ status?: number; body: unknown }>

const PROJECT_ID = /^[a-zA-Z0-9_.-]{1,64}$/
const KEY_LABEL = /^[a-zA-Z0-9_.:-]{1,64}$/
const HASH = /^sha256:[0-9a-f]{64}$/
const ACTOR = /^[\x21-\x7e][\x20-\x7e]{0,127}$/
const FEATURES: readonly (keyof FeatureFlags)[] = ['proveBatch', 'sponsoredWallet', 'relayToConfidentialSpace', 'tee', 'workstation']
const PERIODS = ['hour', 'day', 'month'] as const
const FIELDS = ['name', 'plan', 'scopes', 'features', 'credits', 'secretHash']

const invalid = (message: string) => new GatewayError(400, 'invalid_body', message)
const projectNotFound = (id: string) => new GatewayError(404, 'project_not_found', `project ${id} does not exist`)

function object(value: unknown, field: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid(`${field} must be a JSON object`)
  return value as Record<string, unknown>
}

/** Validates the overridable fields of a request body; unknown fields are refused by name. */
export function parseFields(body: Record<string, unknown>, allowed: readonly string[] = FIELDS): ProjectFields {
  for (const name of Object.keys(body)) if (!allowed.includes(name)) throw invalid(`unknown field ${name}; allowed: ${allowed.join(', ')}`)
  const fields: ProjectFields = {}
  if (body.name !== undefined) {
    if (typeof body.name !== 'string' || body.name.length < 1 || body.name.length > 200) throw invalid('name must be a string of 1 to 200 characters')
    fields.name = body.name
  }
  if (body.plan !== undefined) {
    if (typeof body.plan !== 'string' || !/^[a-zA-Z0-9_.-]{1,64}$/.test(body.plan)) throw invalid('plan must be 1 to 64 letters, digits, _ . or -')
    fields.plan = body.plan
  }
  if (body.scopes !== undefined) {
    const scopes = body.scopes
    if (!Array.isArray(scopes) || scopes.some((s) => !(SCOPES as readonly unknown[]).includes(s)) || new Set(scopes).size !== scopes.length) {
      throw invalid(`scopes must be an array of distinct values among ${SCOPES.join(', ')}`)
    }
    fields.scopes = scopes as string[]
  }
  if (body.features !== undefined) {
    const features = object(body.features, 'features')
    const parsed: Partial<FeatureFlags> = {}
    for (const [name, value] of Object.entries(features)) {
      if (!(FEATURES as readonly string[]).includes(name)) throw invalid(`features.${name} is not a feature; known: ${FEATURES.join(', ')}`)
      if (typeof value !== 'boolean') throw invalid(`features.${name} must be true or false`)
      parsed[name as keyof FeatureFlags] = value
    }
    fields.features = parsed
  }
  if (body.credits !== undefined) {
    const credits = object(body.credits, 'credits')
    const parsed: ProjectFields['credits'] = {}
    for (const [name, value] of Object.entries(credits)) {
      if (name === 'allocation') {
        if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) throw invalid('credits.allocation must be an integer >= 0')
        parsed.allocation = value
      } else if (name === 'period') {
        if (!(PERIODS as readonly unknown[]).includes(value)) throw invalid(`credits.period must be one of ${PERIODS.join(', ')}`)
        parsed.period = value as (typeof PERIODS)[number]
      } else throw invalid(`credits.${name} is not a field; allowed: allocation, period`)
    }
    fields.credits = parsed
  }
  if (body.secretHash !== undefined) {
    if (body.secretHash !== null && (typeof body.secretHash !== 'string' || !HASH.test(body.secretHash))) {
      throw invalid('secretHash must be sha256:<64 hex digits> (tollgate hash-key SECRET) or null')
    }
    fields.secretHash = body.secretHash as string | null
  }
  return fields
}

function parseExpiry(value: unknown, field: string): number | undefined {
  if (value === undefined) return undefined
  const at = typeof value === 'string' && /^\d{4}-\d\d-\d\dT/.test(value) ? Date.parse(value) : NaN
  if (!Number.isFinite(at)) throw invalid(`${field} must be an ISO 8601 date-time, e.g. 2027-01-01T00:00:00Z`)
  return at
}

/** What the admin API shows of a project: never a key or its hash. */
export function projectView(project: Project, seed: Project | undefined, override: ProjectOverride | undefined): Record<string, unknown> {
  const seedLabels = new Set(seed?.keys.map((k) => k.label))
  const overridden = override ? FIELDS.filter((f) => override[f as keyof ProjectFields] !== undefined) : []
  return {
    id: project.id,
    name: project.name,
    source: seed ? 'config' : 'runtime',
    plan: project.plan,
    scopes: [...project.scopes],
    credits: project.credits,
    features: project.features,
    hasSecret: project.secretHash !== undefined,
    keys: project.keys.map((key) => ({
      label: key.label,
      disabled: key.disabled,
      expiresAt: key.expiresAt === undefined ? null : new Date(key.expiresAt).toISOString(),
      source: seedLabels.has(key.label) && !override?.keys.some((k) => k.label === key.label && k.hash !== undefined) ? 'config' : 'runtime',
    })),
    overridden,
    ...(override ? { updatedAt: new Date(override.updatedAt).toISOString(), updatedBy: override.updatedBy } : {}),
  }
}

/**
 * Builds the handler of the settings routes. It answers `undefined` for a path that is not one of
 * them, so the caller can try the plugins' admin routes next.
 */
export function settingsAdmin(deps: SettingsAdminDeps, seed: () => readonly Project[]) {
  const view = (id: string) => {
    const project = deps.projects().byId(id)
    if (!project) throw projectNotFound(id)
    return projectView(project, seed().find((p) => p.id === id), deps.sync.snapshot.projects.find((o) => o.id === id))
  }
  const existing = (id: string): Project => {
    const project = deps.projects().byId(id)
    if (!project) throw projectNotFound(id)
    return project
  }
  const conflict = (error: unknown): never => {
    if (error instanceof SettingsConflict) throw new GatewayError(409, error.code, error.message)
    throw error
  }
  const done = async (status: number, id: string, extra: Record<string, unknown> = {}) => {
    await deps.sync.refresh()
    return { status, body: { ...extra, project: view(id) } }
  }
  const setDisabled = (disabled: boolean): Handler => async ({ params, actor }) => {
    const project = existing(params.id)
    if (!project.keys.some((k) => k.label === params.label)) throw new GatewayError(404, 'key_not_found', `project ${params.id} has no key labelled ${params.label}`)
    await deps.settings.updateKey(params.id, params.label, { disabled }, actor)
    return done(200, params.id)
  }

  const routes: { method: string; path: string; handler: Handler }[] = [
    { method: 'GET', path: '/admin/projects', handler: async () => ({ body: { projects: deps.projects().all().map((p) => view(p.id)) } }) },
    { method: 'GET', path: '/admin/projects/:id', handler: async ({ params }) => ({ body: { project: view(params.id) } }) },
    {
      method: 'POST',
      path: '/admin/projects',
      handler: async ({ body, actor }) => {
        const { id, ...rest } = object(body, 'body')
        if (typeof id !== 'string' || !PROJECT_ID.test(id)) throw invalid('id must be 1 to 64 letters, digits, _ . or -')
        if (deps.projects().byId(id)) throw new GatewayError(409, 'project_exists', `project ${id} already exists`)
        await deps.settings.createProject(id, parseFields(rest), actor).catch(conflict)
        return done(201, id)
      },
    },
    {
      method: 'PATCH',
      path: '/admin/projects/:id',
      handler: async ({ params, body, actor }) => {
        existing(params.id)
        const fields = parseFields(object(body, 'body'))
        if (Object.keys(fields).length === 0) throw invalid(`the body changes nothing; fields: ${FIELDS.join(', ')}`)
        await deps.settings.updateProject(params.id, fields, actor)
        return done(200, params.id)
      },
    },
    {
      method: 'POST',
      path: '/admin/projects/:id/keys',
      handler: async ({ params, body, actor }) => {
        const project = existing(params.id)
        const request = object(body ?? {}, 'body')
        for (const name of Object.keys(request)) if (!['label', 'hash', 'expiresAt'].includes(name)) throw invalid(`unknown field ${name}; allowed: label, hash, expiresAt`)
        if (typeof request.label !== 'string' || !KEY_LABEL.test(request.label)) throw invalid('label must be 1 to 64 letters, digits, _ . : or -')
        if (request.hash !== undefined && (typeof request.hash !== 'string' || !HASH.test(request.hash))) throw invalid('hash must be sha256:<64 hex digits> (tollgate hash-key KEY)')
        const expiresAt = parseExpiry(request.expiresAt, 'expiresAt')
        const label = request.label
        if (project.keys.some((k) => k.label === label)) throw new GatewayError(409, 'key_exists', `project ${project.id} already has a key labelled ${label}`)
        // Generated: 256 random bits; only its hash is stored, the key is in this answer and nowhere else.
        const generated = request.hash === undefined ? 'tg_' + randomBytes(32).toString('base64url') : undefined
        const hash = (request.hash as string | undefined) ?? hashCredential(generated!)
        if (deps.projects().ownerOfHash(hash)) throw new GatewayError(409, 'key_exists', 'this key is already registered')
        await deps.settings.addKey(project.id, { label, hash, ...(expiresAt !== undefined ? { expiresAt } : {}) }, actor).catch(conflict)
        return done(201, project.id, generated ? { key: generated, label } : { label })
      },
    },
    { method: 'POST', path: '/admin/projects/:id/keys/:label/disable', handler: setDisabled(true) },
    { method: 'POST', path: '/admin/projects/:id/keys/:label/enable', handler: setDisabled(false) },
    {
      method: 'POST',
      path: '/admin/projects/:id/reset',
      handler: async ({ params, actor }) => {
        existing(params.id)
        await deps.settings.resetProject(params.id, actor)
        await deps.sync.refresh()
        const project = deps.projects().byId(params.id)
        return { body: project ? { project: view(params.id) } : { removed: params.id } }
      },
    },
    {
      method: 'GET',
      path: '/admin/projects/:id/audit',
      handler: async ({ params, query }) => ({ body: { changes: await deps.settings.audit({ projectId: params.id, limit: limitOf(query) }) } }),
    },
    { method: 'GET', path: '/admin/settings/audit', handler: async ({ query }) => ({ body: { changes: await deps.settings.audit({ limit: limitOf(query) }) } }) },
  ]
  const router = new Router(routes.map((route) => ({ methods: [route.method], path: route.path, value: route.handler })))

  return async (req: IncomingMessage, url: URL): Promise<{ status?: number; body: unknown } | undefined> => {
    let match
    try {
      match = router.match(req.method ?? 'GET', normalisePath(url.pathname))
    } catch (error) {
      if (error instanceof GatewayError && (error.status === 404 || error.status === 405)) return undefined
      throw error
    }
    const actorHeader = req.headers['x-admin-actor']
    const actor = typeof actorHeader === 'string' ? actorHeader : 'admin'
    if (!ACTOR.test(actor)) throw new GatewayError(400, 'invalid_header', 'x-admin-actor must be 1 to 128 printable ASCII characters')
    const raw = req.method === 'POST' || req.method === 'PATCH' ? await readBody(req, 1 << 16) : undefined
    const body = raw?.length ? parseJson(raw) : undefined
    if (req.method === 'PATCH' && body === undefined) throw invalid('a JSON body is required')
    return match.value({ params: match.params, query: url.searchParams, body, actor })
  }
}

function limitOf(query: URLSearchParams): number {
  const raw = query.get('limit')
  if (raw === null) return 100
  const limit = Number(raw)
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 10_000) throw new GatewayError(400, 'invalid_query', 'limit must be an integer from 1 to 10000')
  return limit
}
