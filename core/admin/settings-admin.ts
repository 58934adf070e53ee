/**
 * The admin API over run-time project settings (token-protected, on the admin listener):
 *
 *   GET   /admin/projects                             effective projects (seed + overrides)
 *   GET   /admin/projects/:id
 *   POST  /admin/projects                             create a project that exists only in the store
 *   PATCH /admin/projects/:id                         plan, name, scopes, features, credits, secretHash
 *   GET   /admin/projects/:id/keys                    labels, prefixes and states (never a hash)
 *   POST  /admin/projects/:id/keys                    add a key by hash, or generate one (shown once)
 *   POST  /admin/projects/:id/keys/:label/disable     (and /enable)
 *   POST  /admin/projects/:id/keys/:label/expire      {expiresAt: ISO | null}
 *   POST  /admin/projects/:id/keys/:label/rotate      {graceSeconds}: a new key (shown once); the old one works until the grace ends
 *                                                     (a key in its grace, `…rotated-x`, is refused: 409 key_in_grace)
 *   POST  /admin/projects/:id/secret                  generate the project secret (shown once)
 *   POST  /admin/projects/:id/secret/rotate           {graceSeconds}: a new secret (shown once); both work during the grace
 *   POST  /admin/projects/:id/reset                   drop the run-time overrides: the yaml is in force again
 *   GET   /admin/projects/:id/audit                   changes to the project, newest first
 *   GET   /admin/settings/audit                       every change, newest first
 *
 * A change answers after this instance's directory has it, so the next request here is judged by
 * it; other instances follow on the store's notification (or its backstop re-read).
 *
 * Who may: operators (and the admin bearer token) everything; an owner only their own projects (any
 * other answers 404 project_not_found, as a project that does not exist), and there only the name,
 * keys, the secret and the Sponsored Wallet / ZK Prove Batch toggles. A session user toggling those
 * two must repeat their account password in the same body (`password`); Relay to Confidential Space
 * and TEE are operators' only. The audit actor is the authenticated principal: the session's user
 * (email), or `admin-token` for the bearer token; an `x-admin-actor` header is kept as the entry's
 * `actorNote`, never as its actor (core/accounts/authenticate.ts says why).
 */
import { randomBytes } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { auditActor, type Accounts, type AdminPrincipal } from '../accounts/authenticate.ts'
import { requireOperator } from './admin.ts'
import { GatewayError } from '../proxy/errors.ts'
import { parseJson, readBody, refuseUnknownFields } from '../proxy/http/body.ts'
import { generateKey, hashCredential, type Project, type ProjectDirectory } from '../projects/projects.ts'
import { Router } from '../proxy/router.ts'
import type { ProjectSettingsSync } from '../projects/project-settings.ts'
import { carryOnScheduleChange, carryView } from '../projects/credit-carry.ts'
import type { Store } from '../store/types.ts'
import { FIELDS, HASH, KEY_LABEL, PROJECT_ID, ROTATED_LABEL, invalid, limitOf, object, parseExpiry, parseFields, parseGrace } from './settings-admin-input.ts'
import { SettingsConflict, type ChangeActor, type FeatureFlags, type ProjectFields, type ProjectOverride, type SettingsStore } from '../store/settings/types.ts'
import { actorName } from '../store/settings/fields.ts'

export interface SettingsAdminDeps {
  settings: SettingsStore
  sync: ProjectSettingsSync
  /** The directory of the table in service. */
  projects(): ProjectDirectory
  accounts: Accounts
  /** Carries unspent grants when a change moves the project to another period (core/projects/credit-carry.ts). */
  store: Pick<Store, 'carryCredits'>
  /** Epoch-ms clock that picks the current period. */
  clock?: () => number
}

type Handler = (req: {
  params: Record<string, string>
  query: URLSearchParams
  body: unknown
  actor: ChangeActor
  principal: AdminPrincipal
}) => Promise<{ status?: number; body: unknown }>

/** What an owner may PATCH; the rest (plan, scopes, credits, secretHash) is an operator's. */
const OWNER_FIELDS = ['name', 'features']
/** Toggles that need the account password from a session user. */
const PASSWORD_FEATURES: readonly (keyof FeatureFlags)[] = ['proveBatch', 'sponsoredWallet']
/** Toggles only an operator may change. */
const OPERATOR_FEATURES: readonly (keyof FeatureFlags)[] = ['relayToConfidentialSpace', 'tee', 'workstation']

const projectNotFound = (id: string) => new GatewayError(404, 'project_not_found', `project ${id} does not exist`)

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
  const clock = deps.clock ?? Date.now
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
  const keyOf = (project: Project, label: string) => {
    const key = project.keys.find((k) => k.label === label)
    if (!key) throw new GatewayError(404, 'key_not_found', `project ${project.id} has no key labelled ${label}`)
    return key
  }
  const setDisabled = (disabled: boolean): Handler => async ({ params, actor }) => {
    keyOf(existing(params.id), params.label)
    await deps.settings.updateKey(params.id, params.label, { disabled }, actor)
    return done(200, params.id)
  }
  const operatorOnly = (handler: Handler): Handler => async (req) => {
    requireOperator(req.principal)
    return handler(req)
  }

  const routes: { method: string; path: string; handler: Handler }[] = [
    {
      method: 'GET',
      path: '/admin/projects',
      handler: async ({ principal }) => ({
        body: { projects: deps.projects().all().filter((p) => deps.accounts.canAccessProject(principal, p.id)).map((p) => view(p.id)) },
      }),
    },
    { method: 'GET', path: '/admin/projects/:id', handler: async ({ params }) => ({ body: { project: view(params.id) } }) },
    {
      method: 'POST',
      path: '/admin/projects',
      handler: operatorOnly(async ({ body, actor }) => {
        const { id, ...rest } = object(body, 'body')
        if (typeof id !== 'string' || !PROJECT_ID.test(id)) throw invalid('id must be 1 to 64 letters, digits, _ . or -')
        if (deps.projects().byId(id)) throw new GatewayError(409, 'project_exists', `project ${id} already exists`)
        await deps.settings.createProject(id, parseFields(rest), actor).catch(conflict)
        return done(201, id)
      }),
    },
    {
      method: 'PATCH',
      path: '/admin/projects/:id',
      handler: async ({ params, body, actor, principal }) => {
        existing(params.id)
        const { password, ...rest } = object(body, 'body')
        const fields = parseFields(rest)
        if (Object.keys(fields).length === 0) throw invalid(`the body changes nothing; fields: ${FIELDS.join(', ')}`)
        if (password !== undefined && (typeof password !== 'string' || password.length > 1024)) throw invalid('password must be a string')
        const features = Object.keys(fields.features ?? {}) as (keyof FeatureFlags)[]
        if (principal.role !== 'operator') {
          const barred = Object.keys(fields).find((f) => !OWNER_FIELDS.includes(f))
          if (barred) throw new GatewayError(403, 'operator_only', `only an operator may change ${barred}`)
        }
        const operatorFeature = features.find((f) => OPERATOR_FEATURES.includes(f))
        if (operatorFeature && principal.role !== 'operator') throw new GatewayError(403, 'operator_only', `features.${operatorFeature} is changed by an operator only`)
        // A session user confirms Sponsored Wallet / ZK Prove Batch with the account password; the
        // bearer token is itself the operator's credential and needs none.
        if (principal.kind === 'session' && features.some((f) => PASSWORD_FEATURES.includes(f))) {
          if (typeof password !== 'string' || password === '') throw new GatewayError(403, 'password_required', 'changing features.proveBatch or features.sponsoredWallet needs your account password in the field password')
          if (!(await deps.accounts.passwordMatches(principal, password))) throw new GatewayError(403, 'password_incorrect', 'the password is not this account\'s; nothing was changed')
        }
        const before = existing(params.id)
        await deps.settings.updateProject(params.id, fields, actor)
        await deps.sync.refresh()
        // A schedule change never drops grants: what was granted and not spent moves to the new period.
        const carried = fields.credits ? await carryOnScheduleChange(deps.store, before, deps.projects().byId(params.id), clock(), actorName(actor)) : undefined
        return done(200, params.id, carryView(carried))
      },
    },
    {
      method: 'GET',
      path: '/admin/projects/:id/keys',
      handler: async ({ params }) => {
        const project = existing(params.id)
        const now = Date.now()
        return {
          body: {
            keys: project.keys.map((key) => ({
              label: key.label,
              prefix: key.prefix ?? null,
              disabled: key.disabled,
              expiresAt: key.expiresAt === undefined ? null : new Date(key.expiresAt).toISOString(),
              active: !key.disabled && (key.expiresAt === undefined || now < key.expiresAt),
            })),
          },
        }
      },
    },
    {
      method: 'POST',
      path: '/admin/projects/:id/keys',
      handler: async ({ params, body, actor }) => {
        const project = existing(params.id)
        const request = object(body ?? {}, 'body')
        refuseUnknownFields(request, ['label', 'hash', 'expiresAt'])
        if (typeof request.label !== 'string' || !KEY_LABEL.test(request.label)) throw invalid('label must be 1 to 64 letters, digits, _ . : or -')
        if (request.hash !== undefined && (typeof request.hash !== 'string' || !HASH.test(request.hash))) throw invalid('hash must be sha256:<64 hex digits> (tollgate hash-key KEY)')
        const expiresAt = parseExpiry(request.expiresAt, 'expiresAt')
        const label = request.label
        if (project.keys.some((k) => k.label === label)) throw new GatewayError(409, 'key_exists', `project ${project.id} already has a key labelled ${label}`)
        const generated = request.hash === undefined ? generateKey() : undefined
        const hash = (request.hash as string | undefined) ?? hashCredential(generated!.key)
        if (deps.projects().ownerOfHash(hash)) throw new GatewayError(409, 'key_exists', 'this key is already registered')
        const key = { label, hash, ...(expiresAt !== undefined ? { expiresAt } : {}), ...(generated ? { prefix: generated.prefix } : {}) }
        await deps.settings.addKey(project.id, key, actor).catch(conflict)
        return done(201, project.id, generated ? { key: generated.key, label, prefix: generated.prefix } : { label })
      },
    },
    { method: 'POST', path: '/admin/projects/:id/keys/:label/disable', handler: setDisabled(true) },
    { method: 'POST', path: '/admin/projects/:id/keys/:label/enable', handler: setDisabled(false) },
    {
      method: 'POST',
      path: '/admin/projects/:id/keys/:label/expire',
      handler: async ({ params, body, actor }) => {
        keyOf(existing(params.id), params.label)
        const request = object(body ?? {}, 'body')
        refuseUnknownFields(request, ['expiresAt'])
        if (!('expiresAt' in request)) throw invalid('expiresAt is required: an ISO 8601 date-time, or null for never')
        const expiresAt = request.expiresAt === null ? null : parseExpiry(request.expiresAt, 'expiresAt')!
        await deps.settings.updateKey(params.id, params.label, { expiresAt }, actor)
        return done(200, params.id)
      },
    },
    {
      method: 'POST',
      path: '/admin/projects/:id/keys/:label/rotate',
      handler: async ({ params, body, actor }) => {
        const project = existing(params.id)
        const key = keyOf(project, params.label)
        const grace = parseGrace(body)
        const now = Date.now()
        if (key.disabled || (key.expiresAt !== undefined && now >= key.expiresAt)) {
          throw new GatewayError(409, 'key_inactive', `key ${key.label} is disabled or expired: add a new key instead of rotating it`)
        }
        if (ROTATED_LABEL.test(key.label)) {
          throw new GatewayError(409, 'key_in_grace', `key ${key.label} is in its grace period after a rotation and expires on its own: rotate its successor instead`)
        }
        const generated = generateKey()
        const previous = {
          label: `${key.label.slice(0, 44)}.rotated-${now.toString(36)}`,
          hash: key.hash,
          // The grace never outlives the old key's own expiry.
          expiresAt: Math.min(now + grace * 1000, key.expiresAt ?? Infinity),
          ...(key.prefix ? { prefix: key.prefix } : {}),
        }
        await deps.settings.rotateKey(project.id, key.label, { hash: hashCredential(generated.key), prefix: generated.prefix }, previous, actor).catch(conflict)
        return done(200, project.id, { key: generated.key, label: key.label, prefix: generated.prefix, previousLabel: previous.label, graceUntil: new Date(previous.expiresAt).toISOString() })
      },
    },
    {
      method: 'POST',
      path: '/admin/projects/:id/secret',
      handler: async ({ params, body, actor }) => {
        const project = existing(params.id)
        if (body !== undefined && Object.keys(object(body, 'body')).length > 0) throw invalid('the body must be empty')
        if (project.secretHash !== undefined) throw new GatewayError(409, 'secret_exists', `project ${project.id} has a secret: rotate it (POST /admin/projects/${project.id}/secret/rotate)`)
        const secret = generateSecret()
        await deps.settings.updateProject(project.id, { secretHash: hashCredential(secret), previousSecret: null }, actor)
        return done(201, project.id, { secret })
      },
    },
    {
      method: 'POST',
      path: '/admin/projects/:id/secret/rotate',
      handler: async ({ params, body, actor }) => {
        const project = existing(params.id)
        const grace = parseGrace(body)
        if (project.secretHash === undefined) throw new GatewayError(409, 'no_secret', `project ${project.id} has no secret: create one (POST /admin/projects/${project.id}/secret)`)
        const secret = generateSecret()
        const until = Date.now() + grace * 1000
        await deps.settings.updateProject(project.id, { secretHash: hashCredential(secret), previousSecret: { hash: project.secretHash, until } }, actor)
        return done(200, project.id, { secret, graceUntil: new Date(until).toISOString() })
      },
    },
    {
      method: 'POST',
      path: '/admin/projects/:id/reset',
      handler: operatorOnly(async ({ params, actor }) => {
        const before = existing(params.id)
        await deps.settings.resetProject(params.id, actor)
        await deps.sync.refresh()
        const project = deps.projects().byId(params.id)
        const carried = await carryOnScheduleChange(deps.store, before, project, clock(), actorName(actor))
        return { body: project ? { project: view(params.id), ...carryView(carried) } : { removed: params.id } }
      }),
    },
    {
      method: 'GET',
      path: '/admin/projects/:id/audit',
      handler: async ({ params, query }) => ({ body: { changes: await deps.settings.audit({ projectId: params.id, limit: limitOf(query) }) } }),
    },
    { method: 'GET', path: '/admin/settings/audit', handler: operatorOnly(async ({ query }) => ({ body: { changes: await deps.settings.audit({ limit: limitOf(query) }) } })) },
  ]
  const router = new Router(routes.map((route) => ({ methods: [route.method], path: route.path, value: route.handler })))

  return async (req: IncomingMessage, url: URL, principal: AdminPrincipal): Promise<{ status?: number; body: unknown } | undefined> => {
    const match = router.matchOrPass(req.method ?? 'GET', url.pathname)
    if (match === undefined) return undefined
    // Another user's project answers what a missing one answers, before any other work.
    const projectId = match.params.id
    if (projectId !== undefined && !deps.accounts.canAccessProject(principal, projectId)) throw projectNotFound(projectId)
    const raw = req.method === 'POST' || req.method === 'PATCH' ? await readBody(req, 1 << 16) : undefined
    const body = raw?.length ? parseJson(raw) : undefined
    if (req.method === 'PATCH' && body === undefined) throw invalid('a JSON body is required')
    return match.value({ params: match.params, query: url.searchParams, body, actor: auditActor(principal), principal })
  }
}

function generateSecret(): string {
  return 'tgs_' + randomBytes(32).toString('base64url')
}
