/**
 * Request-body schemas of the event settings service (gateway spec "Create-item request body";
 * the settings list takes an empty JSON object) and the one function that turns an ajv error into
 * a message naming the field, e.g. `scoutSettings.network_id must be 295 or 296`.
 *
 * Every leaf schema carries an `expect` annotation: the whole expectation of that field, so a
 * client reads one sentence whichever keyword (type, format, enum) failed.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import { GatewayError } from '../../core/proxy/plugin-api.ts'
import { ITEM_KINDS, type ItemKind } from './items.ts'

/** Largest entity num a ledger id may carry: the mirror node range-checks nums to 38 bits. */
const MAX_ENTITY_NUM = 2n ** 38n - 1n
const ENTITY_ID = /^0\.0\.(0|[1-9][0-9]{0,11})$/

/**
 * True for a ledger entity id on shard 0, realm 0, in canonical form (no leading zeros).
 * @example isLedgerEntityId('0.0.5802863') // true; isLedgerEntityId('0.0.007') // false
 */
export function isLedgerEntityId(value: string): boolean {
  const match = ENTITY_ID.exec(value)
  return match !== null && BigInt(match[1]) <= MAX_ENTITY_NUM
}

const networkId = {
  description: 'Ledger network: 295 = mainnet, 296 = testnet.',
  enum: [295, 296],
  expect: 'must be 295 or 296',
}

const itemIdByKind: Record<ItemKind, Record<string, unknown>> = {
  contract: {
    description: 'Contract to monitor, as a ledger entity id.',
    type: 'string',
    format: 'ledger-entity-id',
    expect: 'must be a ledger entity id 0.0.<number> for a contract item',
  },
  account: {
    description: 'Account to monitor, as a ledger entity id.',
    type: 'string',
    format: 'ledger-entity-id',
    expect: 'must be a ledger entity id 0.0.<number> for an account item',
  },
  ethtopic: {
    description: 'Ethereum-style event topic to monitor: 0x and 64 hex digits.',
    type: 'string',
    pattern: '^0x[0-9a-fA-F]{64}$',
    expect: 'must be 0x followed by 64 hex digits for an ethtopic item',
  },
}

/** Body of `POST .../create/:item/:apiKey` for one item kind. */
export function createBodySchema(kind: ItemKind): Record<string, unknown> {
  return {
    type: 'object',
    additionalProperties: false,
    required: ['scoutSettings'],
    expect: 'must be a JSON object {"scoutSettings":{"item_id":...,"network_id":...}}',
    properties: {
      scoutSettings: {
        description: 'The item to create.',
        type: 'object',
        additionalProperties: false,
        required: ['item_id', 'network_id'],
        expect: 'must be an object with item_id and network_id',
        properties: { item_id: itemIdByKind[kind], network_id: networkId },
      },
    },
  }
}

/** Body of `POST .../settings/:apiKey`: an empty JSON object. */
export const listBodySchema: Record<string, unknown> = {
  type: 'object',
  additionalProperties: false,
  properties: {},
  expect: 'must be an empty JSON object {}',
}

export interface BodyValidators {
  create: Record<ItemKind, ValidateFunction>
  list: ValidateFunction
}

/** A fresh ajv with the `expect` annotation and the ledger-entity-id format. */
function eventsAjv(): Ajv {
  // allErrors off: the client gets the first problem, and a hostile body cannot make us list thousands.
  const ajv = new Ajv({ allErrors: false, strict: true, verbose: true })
  ajv.addKeyword({ keyword: 'expect', schemaType: 'string' })
  ajv.addFormat('ledger-entity-id', { type: 'string', validate: isLedgerEntityId })
  return ajv
}

/**
 * Compiles every body schema once (called from the plugin's create()).
 * @example
 * ```ts
 * const validators = compileBodyValidators()
 * assertValidBody(validators.create.account, ctx.body?.json)
 * ```
 */
export function compileBodyValidators(): BodyValidators {
  const ajv = eventsAjv()
  const create = {} as Record<ItemKind, ValidateFunction>
  for (const kind of ITEM_KINDS) create[kind] = ajv.compile(createBodySchema(kind))
  return { create, list: ajv.compile(listBodySchema) }
}

/** `/scoutSettings/network_id` → `scoutSettings.network_id`; the root is `body`. */
function fieldPath(pointer: string, extra?: string): string {
  const parts = pointer ? pointer.slice(1).split('/').map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~')) : []
  if (extra !== undefined) parts.push(extra)
  return parts.length ? parts.join('.') : 'body'
}

/** One sentence naming the field and what it must be. */
export function describeBodyError(error: ErrorObject): string {
  const params = error.params as Record<string, string>
  switch (error.keyword) {
    case 'required':
      return `${fieldPath(error.instancePath, params.missingProperty)} is required`
    case 'additionalProperties': {
      const field = fieldPath(error.instancePath, params.additionalProperty)
      const expect = (error.parentSchema as { expect?: string } | undefined)?.expect
      return `${field} is not an accepted field${expect ? `; ${fieldPath(error.instancePath)} ${expect}` : ''}`
    }
    default: {
      const expect = (error.parentSchema as { expect?: string } | undefined)?.expect
      return `${fieldPath(error.instancePath)} ${expect ?? error.message ?? 'is invalid'}`
    }
  }
}

/** Throws 400 `invalid_body` naming the first offending field when the body does not match. */
export function assertValidBody(validate: ValidateFunction, body: unknown): void {
  if (body === undefined) {
    const expect = (validate.schema as { expect?: string }).expect
    throw new GatewayError(400, 'invalid_body', `a request body is required: body ${expect}`)
  }
  if (validate(body)) return
  throw new GatewayError(400, 'invalid_body', describeBodyError(validate.errors![0]))
}
