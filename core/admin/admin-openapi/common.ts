/**
 * Building blocks shared by the areas of the admin OpenAPI document (core/admin/admin-openapi.ts):
 * schema shorthands, answers, parameters and the error answers every authenticated route has.
 */

export type Schema = Record<string, unknown>

export const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` })
export const iso: Schema = { type: 'string', format: 'date-time' }
export const nullableIso: Schema = { type: ['string', 'null'], format: 'date-time' }
export const obj = (properties: Record<string, Schema>, required: string[] = Object.keys(properties), extra = false): Schema => ({
  type: 'object',
  properties,
  required,
  additionalProperties: extra,
})

export const json = (schema: Schema, description = 'OK') => ({ description, content: { 'application/json': { schema } } })
export const errorAnswer = (description: string) => json(ref('Error'), description)
export const body = (schema: Schema) => ({ required: true, content: { 'application/json': { schema } } })
export const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string' } }
export const labelParam = { name: 'label', in: 'path', required: true, schema: { type: 'string' } }
export const limitParam = { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 10000 } }
export const authErrors = { '401': errorAnswer('No, a forged or an expired credential'), '403': errorAnswer('csrf_required, csrf_invalid, operator_only') }
export const projectErrors = { ...authErrors, '404': errorAnswer("project_not_found (also for another owner's project)") }
