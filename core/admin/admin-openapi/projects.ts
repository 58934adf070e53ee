/**
 * The admin OpenAPI document: run-time project settings, keys, the secret and the audit trail
 * (core/admin/settings-admin.ts).
 */
import { authErrors, body, errorAnswer, idParam, iso, json, labelParam, limitParam, nullableIso, obj, projectErrors, ref, type Schema } from './common.ts'

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

/** Component schemas of this area, in document order. */
export const projectSchemas: Record<string, Schema> = {
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
  /** A change that put the project in another period now: its unspent grants moved there (core/projects/credit-carry.ts). */
  ScheduleChangeAnswer: obj(
    { project: ref('Project'), carried: obj({ from: { type: 'string' }, to: { type: 'string' }, amount: { type: 'number', description: 'unspent granted credits moved' } }) },
    ['project'],
  ),
  KeyListItem: obj({ label: { type: 'string' }, prefix: { type: ['string', 'null'] }, disabled: { type: 'boolean' }, expiresAt: nullableIso, active: { type: 'boolean' } }),
  Change: obj({
    seq: { type: 'integer' },
    at: { type: 'integer' },
    actor: { type: 'string', description: "The authenticated principal: a signed-in user's email, or admin-token for the bearer token" },
    actorNote: { type: 'string', description: 'The x-admin-actor header of the request, if it sent one: what the caller said of itself, not authenticated' },
    action: { enum: ['project.create', 'project.update', 'project.reset', 'key.add', 'key.update', 'key.rotate', 'credits.top_up', 'user.create', 'user.update', 'user.delete'] },
    projectId: { type: 'string', description: "'' for a change of an admin account (user.*)" },
    detail: { type: 'object' },
  }, ['seq', 'at', 'actor', 'action', 'projectId', 'detail']),
}

/** Paths of this area, in document order. */
export const projectPaths: Record<string, Record<string, unknown>> = {
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
        '200': json(ref('ScheduleChangeAnswer')),
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
        '409': errorAnswer('key_inactive; key_in_grace (a …rotated-x key left by a rotation expires on its own)'),
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
      responses: { '200': json({ oneOf: [ref('ScheduleChangeAnswer'), obj({ removed: { type: 'string' } })] }), ...projectErrors },
    },
  },
  '/admin/projects/{id}/audit': {
    get: { summary: 'Changes to a project, newest first', parameters: [idParam, limitParam], responses: { '200': json(obj({ changes: { type: 'array', items: ref('Change') } })), ...projectErrors } },
  },
}

/** Every settings change: the last path of the document. */
export const settingsAuditPaths: Record<string, Record<string, unknown>> = {
  '/admin/settings/audit': {
    get: { summary: 'Every settings change (operators)', parameters: [limitParam], responses: { '200': json(obj({ changes: { type: 'array', items: ref('Change') } })), ...authErrors } },
  },
}
