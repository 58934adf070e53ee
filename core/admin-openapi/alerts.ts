/**
 * The admin OpenAPI document: low-balance alerts (core/alerts/admin.ts).
 */
import { authErrors, errorAnswer, idParam, iso, json, obj, projectErrors, ref, type Schema } from './common.ts'

const alertLimitParam = { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000 }, description: 'default 100' }

/** Component schemas of this area, in document order. */
export const alertSchemas: Record<string, Schema> = {
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
}
