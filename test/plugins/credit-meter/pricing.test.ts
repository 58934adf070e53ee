/** Prices of plugins/credit-meter/pricing.ts: per JSON-RPC method, per KiB, the measured cost. */
import t from 'tap'
import { isPriced, jsonRpcPrice, measuredCost, startedKiB } from '../../../plugins/credit-meter/pricing.ts'
import { checkMethodPrices } from '../../../plugins/credit-meter/pricing-check.ts'

const prices = { default: 2, methods: { eth_call: 5, eth_chainId: 0 } }

t.test('JSON-RPC: a call its method, a batch the sum, the rest the default', async (t) => {
  t.equal(jsonRpcPrice(prices, { jsonrpc: '2.0', id: 1, method: 'eth_call' }), 5)
  t.equal(jsonRpcPrice(prices, { method: 'eth_chainId' }), 0, 'a free method')
  t.equal(jsonRpcPrice(prices, { method: 'eth_unknown' }), 2)
  t.equal(jsonRpcPrice(prices, [{ method: 'eth_call' }, { method: 'eth_call' }, { method: 'x' }, 42, null, { method: 7 }]), 5 + 5 + 2 + 2 + 2 + 2)
  t.equal(jsonRpcPrice(prices, []), 2, 'an empty batch: the default')
  t.equal(jsonRpcPrice(prices, undefined), 2)
  t.equal(jsonRpcPrice(prices, { method: 'toString' }), 2, 'inherited names are not prices')
  t.equal(jsonRpcPrice(prices, { method: '__proto__' }), 2)
})

t.test('size and measured cost', async (t) => {
  t.same([0, 1, 1024, 1025, 4096].map(startedKiB), [0, 1, 1, 2, 4])
  t.equal(measuredCost({ 'x-c': '3' }, 'x-c', 10), 3)
  t.equal(measuredCost({ 'x-c': ' 30 ' }, 'x-c', 10), 10, 'capped at the reservation')
  t.equal(measuredCost({ 'x-c': ['4', '9'] }, 'x-c', 10), 4)
  for (const bad of ['-1', '1.5', '', 'abc', '1e3', '9999999999999999']) t.equal(measuredCost({ 'x-c': bad }, 'x-c', 10), undefined, JSON.stringify(bad))
  t.equal(measuredCost(undefined, 'x-c', 10), undefined)
  t.notOk(isPriced({ cost: 1 }))
  t.notOk(isPriced({ cost: 1, perItem: { path: 'proofs' }, perKiB: 0 }), 'the flat path stays flat')
  t.ok(isPriced({ cost: 1, perKiB: 1 }))
  t.ok(isPriced({ cost: 1, actual: { header: 'x' } }))
})

t.test('cross-check: a price for a method the jsonrpc handler does not offer is refused at its key', async (t) => {
  const handler = { name: 'jsonrpc', config: { allow: ['eth_call'], aliases: { eth_chainId: 'net_chain' }, chainInfo: { method: 'x_info' } } }
  t.doesNotThrow(() => checkMethodPrices({ default: 1, methods: { eth_call: 1, eth_chainId: 1, x_info: 1 } }, handler))
  t.throws(() => checkMethodPrices({ default: 1, methods: { eth_cal: 1 } }, handler), { configPath: ['jsonrpc', 'methods', 'eth_cal'], message: /"eth_cal", which the route's jsonrpc handler does not offer/ })
  t.doesNotThrow(() => checkMethodPrices({ default: 1, methods: { anything: 1 } }, undefined), 'no jsonrpc handler: nothing to check against')
})
