/**
 * Turns ajv errors into short messages with a config path. A numeric field's message states its
 * whole expectation (`must be integer >= 0`), whichever keyword failed.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { ConfigPath } from './source.ts'
import type { JsonSchema } from '../proxy/plugin.ts'

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv

export interface SchemaProblem {
  path: ConfigPath
  message: string
  /** Point at the key itself (unknown keys) rather than its value. */
  atKey: boolean
}

/** One ajv instance for config schemas: defaults filled in, every error reported. */
export function createConfigAjv(): Ajv {
  const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: false, allowUnionTypes: true, verbose: true })
  addFormats(ajv)
  return ajv
}

const compiled = new WeakMap<JsonSchema, ValidateFunction>()

/** Compiles a schema once per process (plugin schemas are module constants). */
export function compileOnce(ajv: Ajv, schema: JsonSchema): ValidateFunction {
  let validate = compiled.get(schema)
  if (!validate) {
    validate = ajv.compile(schema)
    compiled.set(schema, validate)
  }
  return validate
}

function pointerToPath(pointer: string): (string | number)[] {
  if (!pointer) return []
  return pointer
    .slice(1)
    .split('/')
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((part) => (/^\d+$/.test(part) ? Number(part) : part))
}

/** `must be integer >= 0 <= 65535`: the whole expectation of a numeric field, whichever part failed. */
function describeNumber(schema: Record<string, any>): string {
  const type = Array.isArray(schema.type) ? schema.type.join(' or ') : (schema.type ?? 'number')
  const bounds = [
    schema.minimum !== undefined ? `>= ${schema.minimum}` : '',
    schema.exclusiveMinimum !== undefined ? `> ${schema.exclusiveMinimum}` : '',
    schema.maximum !== undefined ? `<= ${schema.maximum}` : '',
  ].filter(Boolean)
  return `must be ${[type, ...bounds].join(' ')}`
}

function describe(error: ErrorObject): string {
  const p = error.params as Record<string, any>
  const schema = (error.parentSchema ?? {}) as Record<string, any>
  const numeric = schema.type === 'integer' || schema.type === 'number'
  switch (error.keyword) {
    case 'type':
      return numeric ? describeNumber(schema) : `must be ${p.type}`
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
      return describeNumber(schema)
    case 'enum':
      return `must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`
    case 'const':
      return `must be ${JSON.stringify(p.allowedValue)}`
    case 'required':
      return `missing required key "${p.missingProperty}"`
    case 'additionalProperties':
      return `unknown key "${p.additionalProperty}"`
    case 'pattern':
      return `must match ${p.pattern}`
    case 'format':
      return `must be a valid ${p.format}`
    case 'minItems':
      return `must have at least ${p.limit} item${p.limit === 1 ? '' : 's'}`
    case 'maxItems':
      return `must have at most ${p.limit} items`
    case 'uniqueItems':
      return 'must not contain duplicates'
    case 'minLength':
      return `must be at least ${p.limit} characters`
    default:
      return error.message ?? 'is invalid'
  }
}

/** Groups errors by path, one message per config value. */
export function explain(errors: readonly ErrorObject[] | null | undefined): SchemaProblem[] {
  const byPath = new Map<string, { path: (string | number)[]; parts: string[]; atKey: boolean }>()
  for (const error of errors ?? []) {
    if (error.keyword === 'if' || error.keyword === 'allOf') continue
    const path = pointerToPath(error.instancePath)
    let atKey = false
    if (error.keyword === 'additionalProperties') {
      path.push((error.params as any).additionalProperty)
      atKey = true
    }
    const key = JSON.stringify(path) + (atKey ? '#key' : '')
    const entry = byPath.get(key) ?? { path, parts: [], atKey }
    const text = describe(error)
    if (!entry.parts.includes(text)) entry.parts.push(text)
    byPath.set(key, entry)
  }
  return [...byPath.values()].map(({ path, parts, atKey }) => ({ path, atKey, message: parts.join('; ') }))
}
