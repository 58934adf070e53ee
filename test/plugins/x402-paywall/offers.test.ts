/**
 * The paywall's pure parts: the offered requirements in both versions, the resource URL (no API
 * key in it), reading the payment headers and matching a payment to an offer.
 */
import t from 'tap'
import { Context } from '../../../core/proxy/context.ts'
import type { PaywallConfig } from '../../../plugins/x402-paywall/config.ts'
import { networkOffer } from '../../../plugins/x402-paywall/evm-offer.ts'
import { paymentRequired, resourceUrl } from '../../../plugins/x402-paywall/offers.ts'
import { authorizationKey, deepEqual, matchOffer, readPayment } from '../../../plugins/x402-paywall/payment-header.ts'

const payTo = '0x90f79bf6eb2c4f870365e785982e1f101e93b906'
const config: PaywallConfig = {
  scheme: 'exact', price: '10000', payTo, description: 'data', mimeType: 'application/json', maxTimeoutSeconds: 60,
  networks: [], corsOrigins: [], recheckIntervalMs: 5000,
}
const facilitator = { signerKeyEnv: 'K', receiptTimeoutMs: 1000, rpcTimeoutMs: 1000, pollingIntervalMs: 100 }

function ctxWith(path: string, headers: Record<string, string> = {}, params: Record<string, string> = {}, secret: string[] = []) {
  const ctx = new Context('GET', path, '', { host: 'api.example:8080', ...headers }, '127.0.0.1')
  ctx.params = params
  for (const name of secret) ctx.secretParams.add(name)
  return ctx
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64')

t.test('offers: v2 under CAIP-2, v1 under the short name, default USDC and checksummed addresses', async (t) => {
  const sepolia = networkOffer(config, { network: 'base-sepolia', facilitator })
  t.same(sepolia.v2, {
    scheme: 'exact', asset: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', payTo: '0x90F79bf6EB2c4f870365E785982E1f101E93b906',
    maxTimeoutSeconds: 60, extra: { name: 'USDC', version: '2' }, network: 'eip155:84532', amount: '10000',
  })
  t.equal(sepolia.v1!.network, 'base-sepolia')
  t.equal(sepolia.v1!.maxAmountRequired, '10000')
  const mainnet = networkOffer(config, { network: 'eip155:8453', price: '5', facilitator })
  t.same(mainnet.v2.extra, { name: 'USD Coin', version: '2' }, 'Base mainnet USDC signs as "USD Coin"')
  t.equal(mainnet.v2.amount, '5', 'a per-network price')
  const custom = networkOffer(config, { network: 'eip155:31337', asset: { address: payTo, name: 'T', version: '1', decimals: 18 }, facilitator })
  t.equal(custom.v1Network, 'eip155:31337', 'a chain without a short name keeps CAIP-2 in v1')
  t.throws(() => networkOffer(config, { network: 'eip155:31337', facilitator }), /has no default asset; set asset/)
  t.throws(() => networkOffer(config, { network: 'solana', facilitator }), /neither a known short name nor eip155/)
})

t.test('the 402 answer: v2 in the header, v1 in the body, with the resource URL', async (t) => {
  const offer = networkOffer(config, { network: 'base-sepolia', facilitator })
  const answer = paymentRequired([offer], 'http://h/x', config, { v1: 'X-PAYMENT header is required', v2: 'PAYMENT-SIGNATURE header is required' })
  t.equal(answer.status, 402)
  const v2 = JSON.parse(Buffer.from(answer.headers['payment-required'], 'base64').toString())
  t.same(v2.resource, { url: 'http://h/x', description: 'data', mimeType: 'application/json' })
  t.equal(v2.error, 'PAYMENT-SIGNATURE header is required')
  const v1 = JSON.parse(answer.body.toString())
  t.same(Object.keys(v1), ['x402Version', 'error', 'accepts'])
  t.equal(v1.accepts[0].resource, 'http://h/x')
})

t.test('the resource URL never carries a credential path param', async (t) => {
  const ctx = ctxWith('/paid/sk_live_123/data', {}, { apiKey: 'sk_live_123' }, ['apiKey'])
  t.equal(resourceUrl(ctx, undefined), 'http://api.example:8080/paid/***/data')
  t.equal(resourceUrl(ctx, 'https://api.example.com'), 'https://api.example.com/paid/***/data')
  t.equal(resourceUrl(ctxWith('/x', { host: 'evil"host<' }), undefined), 'http://localhost/x', 'a strange Host header is not echoed')
})

t.test('reading the payment headers', async (t) => {
  t.same(readPayment(ctxWith('/x')), { kind: 'none' })
  t.same(readPayment(ctxWith('/x', { 'payment-signature': b64({ x402Version: 2, accepted: {} }) })), { kind: 'payment', version: 2, payload: { x402Version: 2, accepted: {} } })
  t.same(readPayment(ctxWith('/x', { 'x-payment': b64({ x402Version: 1, scheme: 'exact' }) })), { kind: 'payment', version: 1, payload: { x402Version: 1, scheme: 'exact' } })
  t.match(readPayment(ctxWith('/x', { 'payment-signature': 'not base64!' })), { kind: 'invalid', message: 'PAYMENT-SIGNATURE header must be base64-encoded JSON' })
  t.match(readPayment(ctxWith('/x', { 'x-payment': Buffer.from('[1]').toString('base64') })), { kind: 'invalid', message: 'X-PAYMENT header must hold a JSON object' })
  t.match(readPayment(ctxWith('/x', { 'x-payment': 'A'.repeat(9000) })), { kind: 'invalid', message: /longer than 8192/ })
  const both = readPayment(ctxWith('/x', { 'payment-signature': b64({ x402Version: 2 }), 'x-payment': b64({ x402Version: 1 }) }))
  t.match(both, { kind: 'payment', version: 2 }, 'PAYMENT-SIGNATURE wins when both are sent')
})

t.test('matching a payment to an offer', async (t) => {
  const offer = networkOffer(config, { network: 'base-sepolia', facilitator })
  const reordered = Object.fromEntries(Object.entries(offer.v2).reverse())
  t.ok(deepEqual(reordered, offer.v2), 'key order does not matter')
  t.equal(matchOffer([offer], 2, { accepted: reordered }), offer)
  t.equal(matchOffer([offer], 2, { accepted: { ...offer.v2, amount: '1' } }), undefined)
  t.equal(matchOffer([offer], 2, { accepted: { ...offer.v2, extra: { name: 'USDC' } } }), undefined)
  t.equal(matchOffer([offer], 1, { scheme: 'exact', network: 'base-sepolia' }), offer)
  t.equal(matchOffer([offer], 1, { scheme: 'exact', network: 'eip155:84532' }), undefined, 'v1 pays under the v1 name offered')
  const authorization = { from: '0xAbC0000000000000000000000000000000000001', nonce: '0xFF' }
  t.equal(authorizationKey(offer, { payload: { authorization } }), `eip155:84532:${offer.asset.address}:${authorization.from}:0xff`.toLowerCase())
  t.equal(authorizationKey(offer, { payload: {} }), undefined)
})

t.test('upto: a v2 Permit2 offer naming the settling facilitator, the price as the maximum, nothing for v1', async (t) => {
  const facilitatorAddress = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8'
  const offer = networkOffer({ ...config, scheme: 'upto', pricePerCredit: '100' }, { network: 'base-sepolia', facilitator }, facilitatorAddress)
  t.same(offer.v2, {
    scheme: 'upto', asset: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', payTo: '0x90F79bf6EB2c4f870365E785982E1f101E93b906',
    maxTimeoutSeconds: 60, network: 'eip155:84532', amount: '10000',
    extra: { name: 'USDC', version: '2', assetTransferMethod: 'permit2', facilitatorAddress: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8' },
  })
  t.equal(offer.v1, undefined)
  t.throws(() => networkOffer({ ...config, scheme: 'upto' }, { network: 'base-sepolia', facilitator }), /needs the facilitator's address/)
})
