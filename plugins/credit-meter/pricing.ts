/**
 * What a request is reserved for, and what it finally costs, beyond the flat `cost`:
 * - `jsonrpc`: a price per JSON-RPC method, with a default for every method the table does not
 *   name; a batch costs the sum of its calls (an entry that is not a call costs the default too:
 *   the gateway still answers it).
 * - `perKiB`: credits per started KiB of the request body, added to the price.
 * - `actual`: two-phase metering. The price above is the reservation (an estimate or a maximum);
 *   the upstream reports the work it did in a response header, and the request is charged that,
 *   capped at the reservation; the rest goes back in the same settlement.
 *
 * The flat `cost` (no option set) never comes here: the meter keeps its own one-line path for it.
 */

export interface MethodPrices {
  /** Credits of a method the table does not name. */
  default: number
  /** Method name → credits per call. */
  methods: Record<string, number>
}

export interface PricingOptions {
  cost: number
  perItem?: { path: string }
  jsonrpc?: MethodPrices
  perKiB?: number
  actual?: { header: string }
}

/** Any option beyond the flat cost per request or per item. */
export function isPriced(config: PricingOptions): boolean {
  return config.jsonrpc !== undefined || (config.perKiB ?? 0) > 0 || config.actual !== undefined
}

/** Credits of one JSON-RPC call object (or of anything else in a batch: the default). */
function callPrice(prices: MethodPrices, value: unknown): number {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return prices.default
  const method = (value as { method?: unknown }).method
  if (typeof method !== 'string' || !Object.hasOwn(prices.methods, method)) return prices.default
  return prices.methods[method]
}

/**
 * Credits of a JSON-RPC request: one call, or the sum over a batch. No body, or an empty batch, costs
 * the default (the gateway answers it).
 *
 * @example
 * ```ts
 * const prices = { default: 1, methods: { eth_call: 5 } }
 * jsonRpcPrice(prices, [{ method: 'eth_call' }, { method: 'eth_chainId' }]) // 6
 * jsonRpcPrice(prices, { method: 'eth_call' })                                // 5
 * ```
 */
export function jsonRpcPrice(prices: MethodPrices, json: unknown): number {
  if (!Array.isArray(json)) return callPrice(prices, json)
  if (json.length === 0) return prices.default
  let sum = 0
  for (const call of json) sum += callPrice(prices, call)
  return sum
}

/** Started KiB of `bytes` (0 bytes: 0 KiB). */
export function startedKiB(bytes: number): number {
  return Math.ceil(bytes / 1024)
}

/**
 * The measured cost the upstream reported in `header`: a non-negative integer, capped at the
 * reservation. Missing or not an integer: undefined (the reservation stands, the estimate is charged).
 *
 * @example
 * ```ts
 * measuredCost({ 'x-upstream-cost': '3' }, 'x-upstream-cost', 10)  // 3
 * measuredCost({ 'x-upstream-cost': '30' }, 'x-upstream-cost', 10) // 10
 * measuredCost({}, 'x-upstream-cost', 10)                           // undefined
 * ```
 */
export function measuredCost(headers: Record<string, string | string[] | undefined> | undefined, header: string, reserved: number): number | undefined {
  const raw = headers?.[header]
  const text = Array.isArray(raw) ? raw[0] : raw
  if (text === undefined || !/^\d{1,15}$/.test(text.trim())) return undefined
  return Math.min(Number(text.trim()), reserved)
}
