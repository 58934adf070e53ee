/**
 * The admin OpenAPI document: liveness, readiness, metrics, the document itself, reload and the config in force.
 */
import { authErrors, errorAnswer, json, obj, type Schema } from './common.ts'

export const reloadResult = obj({ ok: { type: 'boolean' }, issues: { type: 'array', items: { type: 'string' } } })
export const workersCount: Schema = { type: 'integer', description: 'cluster mode (server.workers): workers ready' }
export const storeComponents: Schema = { type: 'object', additionalProperties: { type: 'string' } }

/** Liveness, readiness, metrics and this document: the routes without a credential. */
export const servicePaths: Record<string, Record<string, unknown>> = {
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
}

/** Reload and the config in force (operators). */
export const configPaths: Record<string, Record<string, unknown>> = {
  '/admin/reload': {
    post: {
      summary: 'Re-read gateway.yaml (operators)',
      responses: { '200': json(reloadResult), '422': json(reloadResult, 'The new config was refused; the old one stays in force'), ...authErrors },
    },
  },
  '/admin/config': {
    get: { summary: 'The config in force (operators)', responses: { '200': json(obj({ hash: { type: 'string' }, routes: { type: 'array', items: { type: 'string' } } })), ...authErrors } },
  },
}
