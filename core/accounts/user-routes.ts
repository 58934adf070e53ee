/**
 * Admin accounts over the admin API, while the gateway runs (what `tollgate user` does offline):
 *
 *   GET    /admin/users        every account: id, email, role, projects, dates (never a hash)
 *   POST   /admin/users        {email, role, projects?, password} → 201 {user}
 *   PATCH  /admin/users/:id    {role?, projects?, password?}: a new password signs the user's sessions out
 *   DELETE /admin/users/:id    removes the account and ends its sessions at once
 *
 * Operators only (the admin bearer token is one): an owner's session answers 403 operator_only, as
 * every operator route does. A session's change carries x-csrf-token (checked in core/admin/admin.ts
 * before routing). A signed-in operator cannot delete or demote their own account (409
 * self_lockout): the mistake that would leave them outside the API.
 *
 * Every change is appended to the settings audit trail (`user.create|update|delete`, project id
 * '', actor = the session's email or `admin-token`, with an x-admin-actor header as its note). The detail names the account,
 * role, projects and whether the password changed: never the password or its hash.
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { requireOperator } from '../admin/admin.ts'
import { GatewayError } from '../proxy/errors.ts'
import { parseJson, readBody, refuseUnknownFields } from '../proxy/http/body.ts'
import type { ProjectDirectory } from '../projects/projects.ts'
import { Router } from '../proxy/router.ts'
import { AccountConflict, type Role, type UserRecord } from '../store/accounts/types.ts'
import type { SettingsStore } from '../store/settings/types.ts'
import { auditActor, type Accounts, type AdminPrincipal } from './authenticate.ts'
import { hashPassword } from './password.ts'
import { isRole, NEW_ACCOUNT_EMAIL_RULE, newAccountEmail, unknownProjects, weakPassword } from './user-rules.ts'

export interface UserRoutesDeps {
  accounts: Accounts
  /** Keeps the audit trail. */
  settings: Pick<SettingsStore, 'recordAction'>
  /** The directory in service: a project id must name one of its projects. */
  projects(): ProjectDirectory
}

type Answer = { status?: number; body: unknown }
type Handler = (params: Record<string, string>, body: unknown, principal: AdminPrincipal) => Promise<Answer>

const CREATE_FIELDS = ['email', 'role', 'projects', 'password']
const PATCH_FIELDS = ['role', 'projects', 'password']
/** More projects than any account plausibly owns; bounds the work of one request. */
const MAX_PROJECTS = 1000

const invalid = (message: string) => new GatewayError(400, 'invalid_body', message)
const userNotFound = (id: string) => new GatewayError(404, 'user_not_found', `no user ${id.length <= 64 ? id : id.slice(0, 64) + '…'}`)
const iso = (ms: number) => new Date(ms).toISOString()

/** What the API shows of an account: never the password hash. */
export function userListItem(user: UserRecord): Record<string, unknown> {
  return { id: user.id, email: user.email, role: user.role, projects: [...user.projects], createdAt: iso(user.createdAt), updatedAt: iso(user.updatedAt) }
}

function object(value: unknown, allowed: readonly string[]): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid(`the body must be a JSON object with fields ${allowed.join(', ')}`)
  refuseUnknownFields(value as Record<string, unknown>, allowed)
  return value as Record<string, unknown>
}

function parseRole(value: unknown): Role {
  if (!isRole(value)) throw invalid('role must be operator or owner')
  return value
}

/** A new password, by the rules of `tollgate user add|passwd`. */
function parsePassword(value: unknown): string {
  if (typeof value !== 'string') throw invalid('password must be a string')
  const weak = weakPassword(value)
  if (weak) throw invalid(`password: ${weak}`)
  return value
}

/** Builds the handler of the users routes; it answers undefined for any other path. */
export function userRoutes(deps: UserRoutesDeps) {
  const store = () => deps.accounts.store
  const parseProjects = (value: unknown): string[] => {
    if (!Array.isArray(value) || value.length > MAX_PROJECTS || value.some((id) => typeof id !== 'string')) throw invalid(`projects must be an array of at most ${MAX_PROJECTS} project ids`)
    const projects = [...new Set(value as string[])]
    const unknown = unknownProjects(projects, (id) => deps.projects().byId(id) !== undefined)
    if (unknown.length > 0) throw invalid(`projects: no project ${unknown.slice(0, 5).map((id) => id.slice(0, 64)).join(', ')}`)
    return projects
  }
  const existing = async (id: string): Promise<UserRecord> => {
    const user = await store().userById(id)
    if (!user) throw userNotFound(id)
    return user
  }
  const audit = (action: 'user.create' | 'user.update' | 'user.delete', detail: Record<string, unknown>, principal: AdminPrincipal) =>
    deps.settings.recordAction('', action, detail, auditActor(principal))
  const ownAccount = (principal: AdminPrincipal, id: string) => principal.kind === 'session' && principal.user.id === id

  const routes: { method: string; path: string; handler: Handler }[] = [
    {
      method: 'GET',
      path: '/admin/users',
      handler: async () => ({ body: { users: (await store().listUsers()).map(userListItem) } }),
    },
    {
      method: 'POST',
      path: '/admin/users',
      handler: async (_params, body, principal) => {
        const request = object(body, CREATE_FIELDS)
        const email = newAccountEmail(request.email)
        if (email === undefined) throw invalid(NEW_ACCOUNT_EMAIL_RULE)
        const role = parseRole(request.role)
        const projects = request.projects === undefined ? [] : parseProjects(request.projects)
        const password = parsePassword(request.password)
        // A taken email is refused before the scrypt work.
        if (await store().userByEmail(email)) throw new GatewayError(409, 'user_exists', `a user with email ${email} already exists`)
        const passwordHash = await hashPassword(password)
        let user: UserRecord
        try {
          user = await store().createUser({ id: randomUUID(), email, role, passwordHash, projects })
        } catch (error) {
          // Two requests racing for one email: the store's unique email decides.
          if (error instanceof AccountConflict) throw new GatewayError(409, 'user_exists', error.message)
          throw error
        }
        await audit('user.create', { userId: user.id, email, role, projects: user.projects }, principal)
        return { status: 201, body: { user: userListItem(user) } }
      },
    },
    {
      method: 'PATCH',
      path: '/admin/users/:id',
      handler: async (params, body, principal) => {
        const request = object(body, PATCH_FIELDS)
        if (Object.keys(request).length === 0) throw invalid(`the body changes nothing; fields: ${PATCH_FIELDS.join(', ')}`)
        const role = request.role === undefined ? undefined : parseRole(request.role)
        const projects = request.projects === undefined ? undefined : parseProjects(request.projects)
        const password = request.password === undefined ? undefined : parsePassword(request.password)
        const user = await existing(params.id)
        if (role === 'owner' && user.role === 'operator' && ownAccount(principal, user.id)) {
          throw new GatewayError(409, 'self_lockout', 'you cannot demote your own account; another operator (or the admin token) can')
        }
        const passwordHash = password === undefined ? undefined : await hashPassword(password)
        const changed = await store().updateUser(user.id, { role, projects, passwordHash })
        if (!changed) throw userNotFound(params.id)
        const detail: Record<string, unknown> = { userId: user.id, email: user.email }
        if (role !== undefined) detail.role = { from: user.role, to: role }
        if (projects !== undefined) detail.projects = { from: user.projects, to: changed.projects }
        if (passwordHash !== undefined) detail.passwordChanged = true
        await audit('user.update', detail, principal)
        return { body: { user: userListItem(changed), ...(passwordHash !== undefined ? { sessionsEnded: true } : {}) } }
      },
    },
    {
      method: 'DELETE',
      path: '/admin/users/:id',
      handler: async (params, _body, principal) => {
        const user = await existing(params.id)
        if (ownAccount(principal, user.id)) throw new GatewayError(409, 'self_lockout', 'you cannot delete your own account; another operator (or the admin token) can')
        if (!(await store().deleteUser(user.id))) throw userNotFound(params.id)
        await audit('user.delete', { userId: user.id, email: user.email, role: user.role, projects: user.projects }, principal)
        return { body: { deleted: user.id } }
      },
    },
  ]
  const router = new Router(routes.map((route) => ({ methods: [route.method], path: route.path, value: route.handler })))

  return async (req: IncomingMessage, url: URL, principal: AdminPrincipal): Promise<Answer | undefined> => {
    const match = router.matchOrPass(req.method ?? 'GET', url.pathname)
    if (match === undefined) return undefined
    // Authorisation before anything is read: an owner learns nothing about accounts.
    requireOperator(principal)
    const raw = req.method === 'POST' || req.method === 'PATCH' ? await readBody(req, 1 << 16) : undefined
    if ((req.method === 'POST' || req.method === 'PATCH') && !raw?.length) throw invalid('a JSON body is required')
    const body = raw?.length ? parseJson(raw) : undefined
    return match.value(match.params, body, principal)
  }
}
