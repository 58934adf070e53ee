/**
 * Config schema of the meter's pricing options (pricing.ts). Prices are integers ≥ 0: a negative
 * or fractional price is refused by `tollgate check` at its file:line:col.
 */
const credits = (description: string) => ({ type: 'integer', minimum: 0, description })
const methodName = { type: 'string', pattern: '^[A-Za-z0-9_.:-]+$' }

export const pricingSchema = {
  jsonrpc: {
    type: 'object',
    additionalProperties: false,
    required: ['default'],
    description: 'Price JSON-RPC by method: a batch costs the sum of its calls; a method not in `methods` costs `default`. Replaces `cost`; reads the body.',
    properties: {
      default: credits('Credits of a call whose method `methods` does not name (and of a batch entry that is not a call). Required.'),
      methods: {
        type: 'object',
        propertyNames: methodName,
        additionalProperties: credits('Credits per call of this method.'),
        default: {},
        description: "Method name → credits per call. Every name must be a method the route's jsonrpc handler offers.",
      },
    },
  },
  perKiB: credits('Credits per started KiB (1024 bytes) of the request body, added to the price; reads the body. 0: off.'),
  actual: {
    type: 'object',
    additionalProperties: false,
    required: ['header'],
    description: 'Two-phase metering: the price is reserved (the estimate or maximum); the request is charged the integer the upstream sets in `header` (at most the reservation) and the rest is released. A missing or malformed header charges the reservation.',
    properties: {
      header: { type: 'string', pattern: '^[a-z0-9-]+$', description: 'Lower-case response header the upstream reports its measured cost in (credits); removed from the answer.' },
    },
  },
} as const
