/**
 * The admin API over a project's credit balance (on the admin listener; an owner's session reaches
 * its own projects, and a top-up is an operator's):
 *
 *   GET  /admin/projects/:id/credits                  balance (incl. granted), period, schedule, next refill
 *   POST /admin/projects/:id/credits/top-up           {amount, reason?, idempotencyKey?}: grant credits
 *   GET  /admin/projects/:id/credits/ledger?period=   the entries that explain a period's balance
 *
 * A top-up is a grant (`Store.grantCredits`) in the project's current period, with the caller's
 * authenticated principal (a user's email, or `admin-token` for the admin token; `x-admin-actor` is
 * only a note on the audit entry) as its actor: the grant row records who, when, why and
 * how much, and the ledger lists it; a top-up that granted is also appended to the project's
 * audit trail (`credits.top_up`, after the grant committed). Its id is `topup:<project>:<idempotencyKey>`, so the same key
 * sent again (a retry after a lost answer) grants once and answers 200 with the first grant's
 * balance; a top-up without a key gets a random one. Granted credits count in the period they were
 * granted in, like the allocation: the next refill starts from the allocation again; a change of
 * schedule carries the unspent ones into the new period (core/projects/credit-carry.ts). Every balance these
 * routes answer is the store's balance read (the top-up's too), so two answers never disagree.
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { GatewayError } from '../proxy/errors.ts'
import { parseJson, readBody, refuseUnknownFields } from '../proxy/http/body.ts'
import { auditActor, type Accounts, type AdminPrincipal } from '../accounts/authenticate.ts'
import type { Project, ProjectDirectory } from '../projects/projects.ts'
import { Router } from '../proxy/router.ts'
import { scheduleBounds } from '../store/periods.ts'
import type { CreditBalance, Store } from '../store/types.ts'

export interface CreditsAdminDeps {
  /** Its `settings` keeps the audit trail a top-up is appended to. */
  store: Store
  /** The directory of the table in service. */
  projects(): ProjectDirectory
  /** Who may see which project (owners their own; operators all). */
  accounts: Pick<Accounts, 'canAccessProject'>
  /** Epoch-ms clock that picks the current period. */
  clock?: () => number
}

type Handler = (req: { params: Record<string, string>; query: URLSearchParams; body: unknown; principal: AdminPrincipal }) => Promise<{ status?: number; body: unknown }>

const REASON = /^[\x21-\x7e][\x20-\x7e]{0,63}$/
const IDEMPOTENCY_KEY = /^[A-Za-z0-9_.:-]{1,128}$/
/** Period keys: `2026-11`, `2026-11-21`, `2026-11-21T09`, `2026-11-15/P1M`. */
const PERIOD_KEY = /^\d{4}-\d{2}(-\d{2}(T\d{2}|\/P1M)?)?$/
/** Largest top-up: far above any plan, far below 2^53 once added to balances. */
const MAX_TOP_UP = 1_000_000_000_000

const invalid = (message: string) => new GatewayError(400, 'invalid_body', message)

function balanceView(balance: CreditBalance) {
  const { allocation, granted, used, remaining } = balance
  return { allocation, granted, used, remaining }
}

/** Reads a top-up body; every refusal names the field. */
export function parseTopUp(body: unknown): { amount: number; reason: string; idempotencyKey?: string } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid('the body must be a JSON object with amount')
  const request = body as Record<string, unknown>
  refuseUnknownFields(request, ['amount', 'reason', 'idempotencyKey'])
  const { amount, reason, idempotencyKey } = request
  if (typeof amount !== 'number' || !Number.isSafeInteger(amount) || amount < 1 || amount > MAX_TOP_UP) {
    throw invalid(`amount must be an integer from 1 to ${MAX_TOP_UP}`)
  }
  if (reason !== undefined && (typeof reason !== 'string' || !REASON.test(reason))) throw invalid('reason must be 1 to 64 printable ASCII characters')
  if (idempotencyKey !== undefined && (typeof idempotencyKey !== 'string' || !IDEMPOTENCY_KEY.test(idempotencyKey))) {
    throw invalid('idempotencyKey must be 1 to 128 letters, digits, _ . : or -')
  }
  return { amount, reason: (reason as string | undefined) ?? 'top_up', ...(idempotencyKey !== undefined ? { idempotencyKey: idempotencyKey as string } : {}) }
}

/**
 * Builds the handler of the credit routes. It answers `undefined` for any other path, so the
 * admin listener can try the next set of routes.
 *
 * @example
 * ```ts
 * const credits = creditsAdmin({ store, projects: () => table.projects, accounts })
 * const answer = await credits(req, new URL(req.url, 'http://admin'), principal) // undefined: not a credit route
 * ```
 */
export function creditsAdmin(deps: CreditsAdminDeps) {
  const clock = deps.clock ?? Date.now
  // Another user's project answers exactly as a missing one: nothing tells an owner it exists.
  const existing = (id: string, principal: AdminPrincipal): Project => {
    const project = deps.projects().byId(id)
    if (!project || !deps.accounts.canAccessProject(principal, id)) throw new GatewayError(404, 'project_not_found', `project ${id} does not exist`)
    return project
  }
  const schedule = (project: Project) => ({ period: project.credits.period, refill: project.credits.refill ?? null })

  const routes: { method: string; path: string; handler: Handler }[] = [
    {
      method: 'GET',
      path: '/admin/projects/:id/credits',
      handler: async ({ params, principal }) => {
        const project = existing(params.id, principal)
        const bounds = scheduleBounds(project.credits, clock())
        const balance = await deps.store.balance(project.id, bounds.key, project.credits.allocation)
        return {
          body: {
            project: project.id,
            period: bounds.key,
            periodStart: new Date(bounds.startMs).toISOString(),
            nextRefill: new Date(bounds.endMs).toISOString(),
            schedule: schedule(project),
            balance: balanceView(balance),
          },
        }
      },
    },
    {
      method: 'POST',
      path: '/admin/projects/:id/credits/top-up',
      handler: async ({ params, body, principal }) => {
        const project = existing(params.id, principal)
        // Credits are money: an owner buys them (x402), an operator grants them.
        if (principal.role !== 'operator') throw new GatewayError(403, 'operator_only', 'only an operator may top up credits')
        const actor = principal.actor
        const { amount, reason, idempotencyKey } = parseTopUp(body)
        const period = scheduleBounds(project.credits, clock()).key
        const id = `topup:${project.id}:${idempotencyKey ?? randomUUID()}`
        const { created, balance } = await deps.store.grantCredits({ id, projectId: project.id, period, allocation: project.credits.allocation, amount, reason, actor })
        // The grant row is the record of the credits; the audit trail also shows who topped up (once per grant).
        if (created) await deps.store.settings.recordAction(project.id, 'credits.top_up', { grant: id, amount, reason, period: balance.period }, auditActor(principal))
        return { status: created ? 201 : 200, body: { created, grant: { id, amount, reason, actor }, period: balance.period, balance: balanceView(balance) } }
      },
    },
    {
      method: 'GET',
      path: '/admin/projects/:id/credits/ledger',
      handler: async ({ params, query, principal }) => {
        const project = existing(params.id, principal)
        const asked = query.get('period')
        if (asked !== null && !PERIOD_KEY.test(asked)) {
          throw new GatewayError(400, 'invalid_query', 'period must be a period key: 2026-11, 2026-11-21, 2026-11-21T09 or 2026-11-15/P1M')
        }
        const period = asked ?? scheduleBounds(project.credits, clock()).key
        const { balance, entries } = await deps.store.creditLedger(project.id, period, project.credits.allocation)
        return { body: { project: project.id, period, balance: balanceView(balance), entries } }
      },
    },
  ]
  const router = new Router(routes.map((route) => ({ methods: [route.method], path: route.path, value: route.handler })))

  return async (req: IncomingMessage, url: URL, principal: AdminPrincipal): Promise<{ status?: number; body: unknown } | undefined> => {
    const match = router.matchOrPass(req.method ?? 'GET', url.pathname)
    if (match === undefined) return undefined
    const raw = req.method === 'POST' ? await readBody(req, 1 << 16) : undefined
    const body = raw?.length ? parseJson(raw) : undefined
    return match.value({ params: match.params, query: url.searchParams, body, principal })
  }
}
