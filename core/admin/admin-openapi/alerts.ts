/**
 * The admin OpenAPI document: low-balance alerts (core/alerts/admin.ts).
 */
import { authErrors, body, errorAnswer, idParam, iso, json, obj, projectErrors, ref, type Schema } from './common.ts'

const alertLimitParam = { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000 }, description: 'default 100' }

const threshold: Schema = {
  oneOf: [
    obj({ percent: { type: 'number', exclusiveMinimum: 0, maximum: 100 } }),
    obj({ remaining: { type: 'integer', minimum: 0 } }),
  ],
}

/** Component schemas of this area, in document order. */
export const alertSchemas: Record<string, Schema> = {
  AlertThreshold: threshold,
  AlertThresholds: obj({
    project: { type: 'string' },
    configured: { type: 'boolean', description: 'gateway.yaml gives the project an alerts webhook (url and secret)' },
    url: { type: ['string', 'null'], description: 'the webhook receiver; the secret is never shown' },
    source: { enum: ['config', 'runtime'], description: 'runtime: set through this API, in place of the yaml thresholds' },
    thresholds: { type: 'array', items: ref('AlertThreshold'), description: 'the thresholds in force' },
    configThresholds: { type: 'array', items: ref('AlertThreshold'), description: "gateway.yaml's, in force again after a PUT of null or a reset" },
  }),
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
}

/** Paths of this area, in document order. */
export const alertPaths: Record<string, Record<string, unknown>> = {
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
  '/admin/projects/{id}/alerts/thresholds': {
    get: {
      summary: "A project's low-balance thresholds: those in force, and gateway.yaml's",
      parameters: [idParam],
      responses: { '200': json(ref('AlertThresholds')), ...projectErrors },
    },
    put: {
      summary: 'Set the thresholds in place of gateway.yaml\'s (operators; audited as project.update); null goes back to the yaml',
      parameters: [idParam],
      requestBody: body(obj({ thresholds: { oneOf: [{ type: 'array', minItems: 1, maxItems: 10, items: ref('AlertThreshold') }, { type: 'null' }] } })),
      responses: {
        '200': json(ref('AlertThresholds')),
        '400': errorAnswer('invalid_body: the message names the field, e.g. thresholds[1].percent'),
        ...projectErrors,
        '409': errorAnswer('alerts_not_configured: the project has no alerts webhook in gateway.yaml'),
      },
    },
  },
}
