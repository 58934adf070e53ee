/**
 * The OpenAPI 3.1 document of the admin API, served at `GET /admin/openapi.json` (no credential:
 * it describes routes, it holds no data). Response schemas are strict enough that
 * test/e2e/accounts-openapi.test.ts validates real answers of every documented endpoint with ajv.
 *
 * Plugins' admin routes are documented here when the core ships them (usage of credit-meter).
 */

type Schema = Record<string, unknown>

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` })
const iso: Schema = { type: 'string', format: 'date-time' }
const nullableIso: Schema = { type: ['string', 'null'], format: 'date-time' }
const obj = (properties: Record<string, Schema>, required: string[] = Object.keys(properties), extra = false): Schema => ({
  type: 'object',
  properties,
  required,
  additionalProperties: extra,
})

const schemas: Record<string, Schema> = {
  Error: obj({ error: obj({ code: { type: 'string', pattern: '^[a-z0-9_]+$' }, message: { type: 'string' } }) }),
  User: obj({ id: { type: 'string' }, email: { type: 'string' }, role: { enum: ['operator', 'owner'] }, projects: { type: 'array', items: { type: 'string' } } }),
  SessionAnswer: obj({
    user: ref('User'),
    session: obj({ id: { type: 'string' }, createdAt: iso, expiresAt: iso, idleExpiresAt: iso }),
    csrfToken: { type: 'string' },
  }),
  SessionListItem: obj({
    id: { type: 'string' },
    userId: { type: 'string' },
    email: { type: ['string', 'null'] },
    createdAt: iso,
    lastSeenAt: iso,
    expiresAt: iso,
    idleExpiresAt: iso,
    current: { type: 'boolean' },
  }),
  Features: obj({ proveBatch: { type: 'boolean' }, sponsoredWallet: { type: 'boolean' }, relayToConfidentialSpace: { type: 'boolean' }, tee: { type: 'boolean' }, workstation: { type: 'boolean' } }),
  Project: obj(
    {
      id: { type: 'string' },
      name: { type: 'string' },
      source: { enum: ['config', 'runtime'] },
      plan: { type: 'string' },
      scopes: { type: 'array', items: { type: 'string' } },
      credits: obj({ allocation: { type: 'integer' }, period: { enum: ['hour', 'day', 'month'] } }),
      features: ref('Features'),
      hasSecret: { type: 'boolean' },
      keys: {
        type: 'array',
        items: obj({ label: { type: 'string' }, disabled: { type: 'boolean' }, expiresAt: nullableIso, source: { enum: ['config', 'runtime'] } }),
      },
      overridden: { type: 'array', items: { type: 'string' } },
      updatedAt: iso,
      updatedBy: { type: 'string' },
    },
    ['id', 'name', 'source', 'plan', 'scopes', 'credits', 'features', 'hasSecret', 'keys', 'overridden'],
  ),
  ProjectAnswer: obj({ project: ref('Project') }),
  KeyListItem: obj({ label: { type: 'string' }, prefix: { type: ['string', 'null'] }, disabled: { type: 'boolean' }, expiresAt: nullableIso, active: { type: 'boolean' } }),
  Change: obj({
    seq: { type: 'integer' },
    at: { type: 'integer' },
    actor: { type: 'string' },
    action: { enum: ['project.create', 'project.update', 'project.reset', 'key.add', 'key.update', 'key.rotate', 'credits.top_up'] },
    projectId: { type: 'string' },
    detail: { type: 'object' },
  }),
  UsageRow: obj({ bucket: iso, apiType: { type: 'string' }, requests: { type: 'integer' }, credits: { type: 'number' }, errors: { type: 'integer' } }),
  UsageDetailRow: obj({
    bucket: iso,
    apiType: { type: 'string' },
    route: { type: 'string' },
    statusClass: { enum: ['2xx', '3xx', '4xx', '5xx', 'other'] },
    requests: { type: 'integer' },
    credits: { type: 'number' },
    errors: { type: 'integer' },
    latencyMsSum: { type: 'number' },
    latencyMsMax: { type: 'number' },
  }),
  Usage: obj({
    project: { type: 'string' },
    granularity: { enum: ['hour', 'day'] },
    by: { enum: ['apiType', 'route'] },
    from: iso,
    to: iso,
    rows: { type: 'array', items: { oneOf: [ref('UsageRow'), ref('UsageDetailRow')] }, description: 'UsageRow with by=apiType, UsageDetailRow with by=route' },
    totals: obj({ requests: { type: 'integer' }, credits: { type: 'number' }, errors: { type: 'integer' } }),
    balance: obj({
      period: { type: 'string' },
      periodLength: { enum: ['hour', 'day', 'month'] },
      refill: { type: ['object', 'null'] },
      allocation: { type: 'integer' },
      granted: { type: 'number' },
      used: { type: 'number' },
      remaining: { type: 'number' },
    }),
  }),
  Balance: obj({ allocation: { type: 'integer' }, granted: { type: 'number' }, used: { type: 'number' }, remaining: { type: 'number' } }),
  Credits: obj({
    project: { type: 'string' },
    period: { type: 'string' },
    periodStart: iso,
    nextRefill: iso,
    schedule: obj({ period: { enum: ['hour', 'day', 'month'] }, refill: { type: ['object', 'null'] } }),
    balance: ref('Balance'),
  }),
  TopUp: obj({
    created: { type: 'boolean', description: 'false: this idempotencyKey granted before; nothing was added' },
    grant: obj({ id: { type: 'string' }, amount: { type: 'integer' }, reason: { type: 'string' }, actor: { type: 'string' } }),
    period: { type: 'string' },
    balance: ref('Balance'),
  }),
  LedgerEntry: {
    oneOf: [
      obj({ kind: { const: 'allocation' }, amount: { type: 'number' } }),
      obj({ kind: { const: 'grant' }, id: { type: 'string' }, reason: { type: 'string' }, actor: { type: 'string' }, at: iso, amount: { type: 'number' } }),
      obj({ kind: { const: 'charge' }, apiType: { type: 'string' }, hour: { type: 'string' }, amount: { type: 'number' } }),
      obj({ kind: { const: 'pending' }, amount: { type: 'number' } }),
      obj({ kind: { const: 'earlier_charges' }, amount: { type: 'number' } }),
    ],
  },
  Ledger: obj({ project: { type: 'string' }, period: { type: 'string' }, balance: ref('Balance'), entries: { type: 'array', items: ref('LedgerEntry') } }),
  Alert: obj(
    {
      id: { type: 'string' },
      projectId: { type: 'string' },
      period: { type: 'string' },
      threshold: { type: 'object', properties: { percent: { type: 'number' }, remaining: { type: 'number' } }, additionalProperties: false },
      level: { type: 'number' },
      balance: obj({ allocation: { type: 'number' }, used: { type: 'number' }, remaining: { type: 'number' } }),
      firedAt: iso,
      url: { type: 'string' },
      state: { enum: ['delivering', 'delivered', 'failed'] },
      attempts: {
        type: 'array',
        items: obj({ n: { type: 'integer' }, at: iso, status: { type: 'integer' }, error: { type: 'string' }, durationMs: { type: 'number' } }, ['n', 'at', 'durationMs']),
      },
      nextAttemptAt: iso,
    },
    ['id', 'projectId', 'period', 'threshold', 'level', 'balance', 'firedAt', 'url', 'state', 'attempts'],
  ),
  Workstation: obj(
    {
      projectId: { type: 'string' },
      state: ref('WorkstationState'),
      desired: { enum: ['running', 'stopped', 'deleted'] },
      reason: { type: 'string' },
      since: { type: 'integer', description: 'epoch ms' },
      openPath: { type: 'string', description: 'where a browser opens it on the public listener (state ready)' },
      lastActivityAt: { type: 'integer', description: 'epoch ms' },
      creditsCharged: { type: 'number' },
      history: {
        type: 'array',
        items: obj({ at: { type: 'integer' }, from: ref('WorkstationState'), to: ref('WorkstationState'), by: { type: 'string' }, reason: { type: 'string' } }, ['at', 'from', 'to', 'by']),
      },
    },
    ['projectId', 'state', 'creditsCharged', 'history'],
  ),
  WorkstationState: { enum: ['absent', 'provisioning', 'starting', 'ready', 'stopping', 'stopped', 'deleting', 'failed'] },
}

const json = (schema: Schema, description = 'OK') => ({ description, content: { 'application/json': { schema } } })
const errorAnswer = (description: string) => json(ref('Error'), description)
const body = (schema: Schema) => ({ required: true, content: { 'application/json': { schema } } })
const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string' } }
const labelParam = { name: 'label', in: 'path', required: true, schema: { type: 'string' } }
const limitParam = { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 10000 } }
const authErrors = { '401': errorAnswer('No, a forged or an expired credential'), '403': errorAnswer('csrf_required, csrf_invalid, operator_only') }
const projectErrors = { ...authErrors, '404': errorAnswer("project_not_found (also for another owner's project)") }
const alertLimitParam = { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000 }, description: 'default 100' }
const workstationErrors = {
  ...projectErrors,
  '400': errorAnswer('invalid_path: the project id is not valid percent-encoding'),
  '403': errorAnswer('workstation_not_enabled (features.workstation), csrf_*'),
}
const workstationAction = { '202': json(ref('Workstation'), 'Accepted: the transition runs in the background'), ...workstationErrors, '409': errorAnswer("the transition's refusal: workstation_exists, workstation_not_provisioned, workstation_deleting, ...") }
const grace = obj({ graceSeconds: { type: 'integer', minimum: 0, maximum: 2592000 } })
const projectFields: Schema = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    plan: { type: 'string' },
    scopes: { type: 'array', items: { type: 'string' } },
    features: { type: 'object', additionalProperties: { type: 'boolean' } },
    credits: { type: 'object' },
    secretHash: { type: ['string', 'null'] },
    password: { type: 'string', description: 'The account password: required from a session user changing features.proveBatch or features.sponsoredWallet.' },
  },
}

const reloadResult = obj({ ok: { type: 'boolean' }, issues: { type: 'array', items: { type: 'string' } } })
const workersCount: Schema = { type: 'integer', description: 'cluster mode (server.workers): workers ready' }
const storeComponents: Schema = { type: 'object', additionalProperties: { type: 'string' } }

const paths: Record<string, Record<string, unknown>> = {
  '/healthz': { get: { summary: 'Liveness', security: [], responses: { '200': json(obj({ status: { const: 'ok' }, workers: workersCount }, ['status'])) } } },
  '/readyz': {
    get: {
      summary: 'Readiness: not while draining or while the store is unreachable',
      security: [],
      responses: {
        '200': json(obj({ status: { const: 'ready' }, store: storeComponents, workers: workersCount }, ['status'])),
        '503': json(obj({ status: { const: 'not_ready' }, reason: { enum: ['draining', 'store_unavailable'] }, store: storeComponents, workers: workersCount }, ['status']), 'Not ready'),
      },
    },
  },
  '/metrics': {
    get: {
      summary: 'Prometheus metrics (text exposition); the admin token is required when admin.protectMetrics is on',
      security: [{}, { bearer: [] }],
      responses: { '200': { description: 'OK', content: { 'text/plain': { schema: { type: 'string' } } } }, '401': errorAnswer('admin_unauthorized') },
    },
  },
  '/admin/openapi.json': { get: { summary: 'This document', security: [], responses: { '200': json({ type: 'object' }) } } },
  '/admin/session': {
    post: {
      summary: 'Sign in: sets the tollgate_session cookie (HttpOnly, SameSite=Strict)',
      security: [],
      requestBody: body(obj({ email: { type: 'string' }, password: { type: 'string' } })),
      responses: { '200': json(ref('SessionAnswer')), '400': errorAnswer('invalid_body'), '401': errorAnswer('invalid_credentials'), '429': errorAnswer('sign_in_rate_limited (Retry-After)') },
    },
    get: { summary: 'Who am I, and the CSRF token', responses: { '200': json(ref('SessionAnswer')), ...authErrors } },
    delete: { summary: 'Sign out', responses: { '200': json(obj({ signedOut: { const: true } })), ...authErrors } },
  },
  '/admin/sessions': {
    get: { summary: 'Sessions: all (operators) or your own (owners)', responses: { '200': json(obj({ sessions: { type: 'array', items: ref('SessionListItem') } })), ...authErrors } },
  },
  '/admin/sessions/{id}': {
    delete: {
      summary: 'Revoke a session',
      parameters: [idParam],
      responses: { '200': json(obj({ revoked: { type: 'string' } })), ...authErrors, '404': errorAnswer('session_not_found') },
    },
  },
  '/admin/account/identity': {
    get: {
      summary: "The signed-in user's linked identity-provider account (sessions only: the admin token has no account)",
      responses: {
        '200': json(obj({ linked: { type: 'boolean' }, identity: obj({ issuer: { type: 'string' }, subject: { type: 'string' } }, ['issuer', 'subject'], true) }, ['linked'])),
        ...authErrors,
        '403': errorAnswer('account_session_required'),
      },
    },
    delete: {
      summary: 'Unlink the identity-provider account',
      responses: { '200': json(obj({ linked: { const: false } })), ...authErrors, '403': errorAnswer('account_session_required, csrf_required, csrf_invalid'), '404': errorAnswer('identity_not_linked') },
    },
  },
  '/admin/account/identity/link': {
    post: {
      summary: 'Start linking an identity-provider account: the browser goes to authorizeUrl (OpenID Connect, code + PKCE); the callback stores the link. Sets the tollgate_link cookie the callback requires: only this browser can finish the link',
      requestBody: { required: false, content: { 'application/json': { schema: obj({ returnTo: { type: 'string', description: 'A /dashboard/... path the callback returns to, on the request Origin' } }, []) } } },
      responses: {
        '200': json(obj({ authorizeUrl: { type: 'string' } })),
        '400': errorAnswer('invalid_body, invalid_header, oidc_not_configured'),
        ...authErrors,
        '403': errorAnswer('account_session_required, csrf_required, csrf_invalid'),
      },
    },
  },
  '/admin/reload': {
    post: {
      summary: 'Re-read gateway.yaml (operators)',
      responses: { '200': json(reloadResult), '422': json(reloadResult, 'The new config was refused; the old one stays in force'), ...authErrors },
    },
  },
  '/admin/config': {
    get: { summary: 'The config in force (operators)', responses: { '200': json(obj({ hash: { type: 'string' }, routes: { type: 'array', items: { type: 'string' } } })), ...authErrors } },
  },
  '/admin/projects': {
    get: { summary: 'Projects you may see', responses: { '200': json(obj({ projects: { type: 'array', items: ref('Project') } })), ...authErrors } },
    post: {
      summary: 'Create a project (operators)',
      requestBody: body({ ...projectFields, required: ['id'], properties: { id: { type: 'string' }, ...(projectFields.properties as Schema) } }),
      responses: { '201': json(ref('ProjectAnswer')), '400': errorAnswer('invalid_body'), ...authErrors, '409': errorAnswer('project_exists') },
    },
  },
  '/admin/projects/{id}': {
    get: { summary: 'A project', parameters: [idParam], responses: { '200': json(ref('ProjectAnswer')), ...projectErrors } },
    patch: {
      summary: 'Change fields; owners: name and the proveBatch / sponsoredWallet toggles (with password)',
      parameters: [idParam],
      requestBody: body(projectFields),
      responses: {
        '200': json(ref('ProjectAnswer')),
        '400': errorAnswer('invalid_body'),
        ...projectErrors,
        '403': errorAnswer('password_required, password_incorrect, operator_only, csrf_*'),
        '429': errorAnswer('sign_in_rate_limited: password checks spend the account sign-in attempts'),
      },
    },
  },
  '/admin/projects/{id}/keys': {
    get: { summary: 'Keys: label and prefix, never a hash', parameters: [idParam], responses: { '200': json(obj({ keys: { type: 'array', items: ref('KeyListItem') } })), ...projectErrors } },
    post: {
      summary: 'Add a key by hash, or generate one (shown once)',
      parameters: [idParam],
      requestBody: body(obj({ label: { type: 'string' }, hash: { type: 'string' }, expiresAt: iso }, ['label'])),
      responses: {
        '201': json(obj({ key: { type: 'string' }, label: { type: 'string' }, prefix: { type: 'string' }, project: ref('Project') }, ['label', 'project'])),
        '400': errorAnswer('invalid_body'),
        ...projectErrors,
        '409': errorAnswer('key_exists'),
      },
    },
  },
  '/admin/projects/{id}/keys/{label}/disable': {
    post: { summary: 'Disable a key', parameters: [idParam, labelParam], responses: { '200': json(ref('ProjectAnswer')), ...projectErrors } },
  },
  '/admin/projects/{id}/keys/{label}/enable': {
    post: { summary: 'Re-enable a key', parameters: [idParam, labelParam], responses: { '200': json(ref('ProjectAnswer')), ...projectErrors } },
  },
  '/admin/projects/{id}/keys/{label}/expire': {
    post: {
      summary: 'Expire a key at a time (null: never)',
      parameters: [idParam, labelParam],
      requestBody: body(obj({ expiresAt: nullableIso })),
      responses: { '200': json(ref('ProjectAnswer')), '400': errorAnswer('invalid_body'), ...projectErrors },
    },
  },
  '/admin/projects/{id}/keys/{label}/rotate': {
    post: {
      summary: 'Rotate a key: a new one (shown once); the old one works until the grace ends',
      parameters: [idParam, labelParam],
      requestBody: body(grace),
      responses: {
        '200': json(obj({ key: { type: 'string' }, label: { type: 'string' }, prefix: { type: 'string' }, previousLabel: { type: 'string' }, graceUntil: iso, project: ref('Project') })),
        '400': errorAnswer('invalid_body'),
        ...projectErrors,
        '409': errorAnswer('key_inactive'),
      },
    },
  },
  '/admin/projects/{id}/secret': {
    post: {
      summary: 'Generate the project secret (shown once)',
      parameters: [idParam],
      responses: { '201': json(obj({ secret: { type: 'string' }, project: ref('Project') })), ...projectErrors, '409': errorAnswer('secret_exists') },
    },
  },
  '/admin/projects/{id}/secret/rotate': {
    post: {
      summary: 'Rotate the secret: both work until the grace ends',
      parameters: [idParam],
      requestBody: body(grace),
      responses: { '200': json(obj({ secret: { type: 'string' }, graceUntil: iso, project: ref('Project') })), '400': errorAnswer('invalid_body'), ...projectErrors, '409': errorAnswer('no_secret') },
    },
  },
  '/admin/projects/{id}/reset': {
    post: {
      summary: 'Drop the run-time overrides (operators)',
      parameters: [idParam],
      responses: { '200': json({ oneOf: [ref('ProjectAnswer'), obj({ removed: { type: 'string' } })] }), ...projectErrors },
    },
  },
  '/admin/projects/{id}/audit': {
    get: { summary: 'Changes to a project, newest first', parameters: [idParam, limitParam], responses: { '200': json(obj({ changes: { type: 'array', items: ref('Change') } })), ...projectErrors } },
  },
  '/admin/projects/{id}/usage': {
    get: {
      summary: 'Usage and balance of a project (credit-meter plugin); csv and ndjson export the rows alone',
      parameters: [
        idParam,
        { name: 'from', in: 'query', schema: { type: 'string' }, description: 'ISO 8601 date or date-time; default: to minus 30 days' },
        { name: 'to', in: 'query', schema: { type: 'string' }, description: 'ISO 8601 date or date-time; default: now' },
        { name: 'granularity', in: 'query', schema: { enum: ['hour', 'day'], default: 'day' } },
        { name: 'by', in: 'query', schema: { enum: ['apiType', 'route'], default: 'apiType' }, description: 'route: rows per API type, route and status class, with latency' },
        { name: 'format', in: 'query', schema: { enum: ['json', 'csv', 'ndjson'], default: 'json' } },
      ],
      responses: {
        '200': {
          description: 'OK',
          content: {
            'application/json': { schema: ref('Usage') },
            'text/csv': {
              schema: { type: 'string' },
              description: 'A header line, then one line per row (RFC 4180, CRLF)',
              'x-header-lines': { apiType: 'bucket,apiType,requests,credits,errors', route: 'bucket,apiType,route,statusClass,requests,credits,errors,latencyMsSum,latencyMsMax' },
            },
            'application/x-ndjson': { schema: { oneOf: [ref('UsageRow'), ref('UsageDetailRow')] }, description: 'One row per line (this schema is the schema of a line)' },
          },
        },
        '400': errorAnswer('invalid_query: from, to, granularity, by or format'),
        ...projectErrors,
      },
    },
  },
  '/admin/projects/{id}/credits': {
    get: { summary: 'Balance of the current period (granted included), its schedule and next refill', parameters: [idParam], responses: { '200': json(ref('Credits')), ...projectErrors } },
  },
  '/admin/projects/{id}/credits/top-up': {
    post: {
      summary: 'Grant credits in the current period (operators); the same idempotencyKey grants once',
      parameters: [idParam],
      requestBody: body(
        obj(
          {
            amount: { type: 'integer', minimum: 1, maximum: 1_000_000_000_000 },
            reason: { type: 'string', pattern: '^[\\x21-\\x7e][\\x20-\\x7e]{0,63}$', description: "1 to 64 printable ASCII characters (default 'top_up')" },
            idempotencyKey: { type: 'string', pattern: '^[A-Za-z0-9_.:-]{1,128}$' },
          },
          ['amount'],
        ),
      ),
      responses: {
        '201': json(ref('TopUp'), 'Granted'),
        '200': json(ref('TopUp'), 'Already granted with this idempotencyKey (created false)'),
        '400': errorAnswer('invalid_body'),
        ...projectErrors,
      },
    },
  },
  '/admin/projects/{id}/credits/ledger': {
    get: {
      summary: "The entries that explain a period's balance",
      parameters: [idParam, { name: 'period', in: 'query', schema: { type: 'string', pattern: '^\\d{4}-\\d{2}(-\\d{2}(T\\d{2}|/P1M)?)?$' }, description: 'default: the current period' }],
      responses: { '200': json(ref('Ledger')), '400': errorAnswer('invalid_query'), ...projectErrors },
    },
  },
  '/admin/alerts': {
    get: {
      summary: 'Low-balance alerts of every project you may see, newest first',
      parameters: [alertLimitParam],
      responses: { '200': json(obj({ alerts: { type: 'array', items: ref('Alert') } })), '400': errorAnswer('invalid_query'), ...authErrors },
    },
  },
  '/admin/projects/{id}/alerts': {
    get: {
      summary: "A project's low-balance alerts, newest first",
      parameters: [idParam, alertLimitParam],
      responses: { '200': json(obj({ project: { type: 'string' }, alerts: { type: 'array', items: ref('Alert') } })), '400': errorAnswer('invalid_query'), ...projectErrors },
    },
  },
  '/admin/projects/{id}/workstation': {
    get: { summary: "The project's workstation: state, reason, history, open path", parameters: [idParam], responses: { '200': json(ref('Workstation')), ...workstationErrors } },
    delete: { summary: 'Delete the workstation (accepted; the record is gone once deleted)', parameters: [idParam], responses: workstationAction },
  },
  '/admin/projects/{id}/workstation/provision': { post: { summary: 'Provision the workstation (accepted)', parameters: [idParam], responses: workstationAction } },
  '/admin/projects/{id}/workstation/start': { post: { summary: 'Start a stopped workstation (accepted)', parameters: [idParam], responses: workstationAction } },
  '/admin/projects/{id}/workstation/stop': { post: { summary: 'Stop the workstation (accepted)', parameters: [idParam], responses: workstationAction } },
  '/admin/settings/audit': {
    get: { summary: 'Every settings change (operators)', parameters: [limitParam], responses: { '200': json(obj({ changes: { type: 'array', items: ref('Change') } })), ...authErrors } },
  },
}

const DOCUMENT = {
  openapi: '3.1.0',
  info: {
    title: 'tollgate admin API',
    version: '1',
    description:
      'Authenticated by the admin bearer token (an operator) or the tollgate_session cookie of POST /admin/session. ' +
      'A session request that changes state (POST, PATCH, DELETE) carries the x-csrf-token header. Owners reach only their projects.',
  },
  components: {
    schemas,
    securitySchemes: {
      bearer: { type: 'http', scheme: 'bearer' },
      session: { type: 'apiKey', in: 'cookie', name: 'tollgate_session' },
    },
  },
  security: [{ bearer: [] }, { session: [] }],
  paths,
}

/** The document (one shared, frozen-by-convention object). */
export function adminOpenApi(): typeof DOCUMENT {
  return DOCUMENT
}
