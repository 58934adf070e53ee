/**
 * The x402 facilitator through a real gateway process running examples/config/x402.yaml against a
 * local chain (chain id 84532 = base/testnet): payments made with the official SDK clients (v1, v2)
 * and with viem directly; every failure code with its status and body; auth, credits and rate
 * limits; supported and health; 50 concurrent settles of one authorization; path and method errors.
 * Upstream mode (a second gateway forwarding to the first, and broken upstreams) and an RPC that is
 * down at start are in x402-upstream.test.ts.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { BIN, startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { call, x402Config, x402Env } from '../helpers/x402.ts'
import {
  bodyV1, bodyV2, now, permit2RequirementsV2, price, requirementsV1, requirementsV2, sdkBodyV1, sdkBodyV2, sdkPermit2BodyV1, sdkSigner,
  sdkUptoBody, signAuthorization, startFixture, uptoRequirements,
} from '../plugins/x402-facilitator/evm-helpers.ts'

const fresh = (name: string) => `xk_${name}_${randomBytes(10).toString('hex')}`
const KEY = { x402: fresh('x402'), mirror: fresh('mirror'), tiny: fresh('tiny') }

const f = await startFixture(84532)
const { accounts } = f.chain
const payer = sdkSigner(accounts.payer.privateKey)
let gw: GatewayProcess

t.before(async () => {
  const projects = [
    { id: 'payments', key: KEY.x402, scopes: ['x402'], allocation: 100000 },
    { id: 'mirror-only', key: KEY.mirror, scopes: ['mirror'] },
    { id: 'tiny', key: KEY.tiny, scopes: ['x402'], allocation: 3 },
  ]
  gw = await startGatewayProcess(x402Config(projects), { env: x402Env(f.chain) })
})
t.teardown(async () => {
  await gw?.stop('SIGKILL')
  await f.close()
})

const at = (endpoint: string, key = KEY.x402, path = 'base/testnet') => `${gw.url}/x402/${path}/${key}/${endpoint}`
const verify = (body: unknown) => call(at('verify'), { body })
const settle = (body: unknown) => call(at('settle'), { body })
const balances = () => Promise.all([f.balanceOf(accounts.payer.address), f.balanceOf(accounts.payee.address)])
const broadcastLines = () => gw.output.filter((line) => line.includes('"event":"x402_broadcast"'))

t.test('supported lists the v1 and v2 kinds of the path network and the signer; health is ok', async (t) => {
  const supported = await call(at('supported'))
  t.equal(supported.status, 200)
  t.same(supported.json(), {
    kinds: [
      { x402Version: 1, scheme: 'exact', network: 'base-sepolia', extra: { assetTransferMethods: ['eip3009', 'permit2'] } },
      { x402Version: 2, scheme: 'exact', network: 'eip155:84532', extra: { assetTransferMethods: ['eip3009', 'permit2'] } },
      { x402Version: 2, scheme: 'upto', network: 'eip155:84532', extra: { facilitatorAddress: accounts.facilitator.address, assetTransferMethods: ['permit2'] } },
    ],
    extensions: [],
    signers: { 'eip155:*': [accounts.facilitator.address] },
  })
  t.ok(supported.headers['ratelimit-limit'], 'the route is rate limited')
  const health = await call(at('health'))
  t.equal(health.status, 200)
  t.equal(health.text, '{"status":"ok"}')
})

t.test('payments from the official SDK, v2 and v1, verify and settle through the gateway', async (t) => {
  for (const body of [await sdkBodyV2(f, payer), await sdkBodyV1(f, payer)]) {
    const network = body.x402Version === 2 ? 'eip155:84532' : 'base-sepolia'
    const verified = await verify(body)
    t.equal(verified.status, 200)
    t.same(verified.json(), { isValid: true, invalidReason: null, payer: accounts.payer.address })
    const [payerBefore, payeeBefore] = await balances()
    const settled = await settle(body)
    t.equal(settled.status, 200)
    const result = settled.json()
    t.match(result, { success: true, errorReason: null, payer: accounts.payer.address, network, transaction: /^0x[0-9a-f]{64}$/ })
    t.same(await balances(), [payerBefore - BigInt(price), payeeBefore + BigInt(price)], 'one transfer on chain')
    t.ok(broadcastLines().some((line) => line.includes(result.transaction)), 'the broadcast hash is logged')

    const again = await settle(body)
    t.same(again.json(), result, 'a repeated settle answers the stored result')
    t.same(await balances(), [payerBefore - BigInt(price), payeeBefore + BigInt(price)], 'and moves nothing')
    t.match((await verify(body)).json(), { isValid: false, invalidReason: 'invalid_exact_evm_nonce_already_used', payer: accounts.payer.address })
  }
  t.notOk(gw.output.some((line) => line.includes(KEY.x402) || line.includes(accounts.facilitator.privateKey.slice(2))), 'neither the API key nor the signer key is logged')
})

t.test('Permit2 and upto payments from the official SDK verify and settle through the gateway', async (t) => {
  for (const body of [await sdkBodyV2(f, payer, permit2RequirementsV2(f)), await sdkPermit2BodyV1(f, payer)]) {
    const verified = await verify(body)
    t.equal(verified.status, 200)
    t.same(verified.json(), { isValid: true, invalidReason: null, payer: accounts.payer.address })
    const [payerBefore, payeeBefore] = await balances()
    const settled = await settle(body)
    t.match(settled.json(), { success: true, payer: accounts.payer.address, transaction: /^0x[0-9a-f]{64}$/ })
    t.same(await balances(), [payerBefore - BigInt(price), payeeBefore + BigInt(price)], 'one transfer through the Permit2 proxy')
    t.match((await verify(body)).json(), { isValid: false, invalidReason: 'permit2_invalid_nonce' })
  }
  const upto = await sdkUptoBody(f, payer, uptoRequirements(f, '40000'))
  t.same((await verify(upto)).json(), { isValid: true, invalidReason: null, payer: accounts.payer.address })
  const [payerBefore, payeeBefore] = await balances()
  const above = await settle({ ...upto, paymentRequirements: { ...upto.paymentRequirements, amount: '40001' } })
  t.match(above.json(), { success: false, errorReason: 'invalid_upto_evm_payload_settlement_exceeds_amount', payer: accounts.payer.address })
  const settled = await settle({ ...upto, paymentRequirements: { ...upto.paymentRequirements, amount: '777' } })
  t.match(settled.json(), { success: true, amount: '777', transaction: /^0x[0-9a-f]{64}$/ })
  t.same(await balances(), [payerBefore - 777n, payeeBefore + 777n], 'exactly the amount used')

  const malformed = await sdkBodyV2(f, payer, permit2RequirementsV2(f))
  malformed.paymentPayload.payload.permit2Authorization.deadline = 'soon'
  const refused = await verify(malformed)
  t.equal(refused.status, 400)
  t.match(refused.json(), { isValid: false, invalidReason: 'invalid_payload', invalidMessage: /permit2Authorization\.deadline/, payer: accounts.payer.address })
})

t.test('each failure code, with its status and body', async (t) => {
  const reqs = requirementsV2(f)
  const cases: [string, unknown, Record<string, unknown>][] = [
    ['expired', bodyV2(reqs, await signAuthorization(f, { validBefore: now() - 10 })), {
      invalidReason: 'invalid_exact_evm_payload_authorization_valid_before', invalidMessage: /^authorization expired at \d+/,
    }],
    ['not yet valid', bodyV2(reqs, await signAuthorization(f, { validAfter: now() + 3600 })), {
      invalidReason: 'invalid_exact_evm_payload_authorization_valid_after', invalidMessage: /^authorization is not valid before \d+/,
    }],
    ['wrong amount (v2)', bodyV2(reqs, await signAuthorization(f, { value: '9999' })), {
      invalidReason: 'invalid_exact_evm_payload_authorization_value_mismatch',
      invalidMessage: 'authorization.value 9999 differs from paymentRequirements.amount 10000',
    }],
    ['wrong amount (v1)', bodyV1(requirementsV1(f), await signAuthorization(f, { value: '20000' })), {
      invalidReason: 'invalid_exact_evm_authorization_value',
      invalidMessage: 'authorization.value 20000 differs from paymentRequirements.maxAmountRequired 10000',
    }],
    ['wrong payTo', bodyV2(requirementsV2(f, { payTo: accounts.poor.address }), await signAuthorization(f)), {
      invalidReason: 'invalid_exact_evm_recipient_mismatch',
    }],
    ['wrong asset', bodyV2(requirementsV2(f, { asset: accounts.poor.address }), await signAuthorization(f)), {
      invalidReason: 'invalid_payment_requirements', invalidMessage: new RegExp(`asset ${accounts.poor.address} is not accepted on eip155:84532`),
    }],
    ['wrong network', bodyV2(requirementsV2(f, { network: 'eip155:11155111' }), await signAuthorization(f)), {
      invalidReason: 'invalid_exact_evm_network_mismatch', invalidMessage: /network "eip155:11155111" is not served here/,
    }],
    ['bad signature', bodyV2(reqs, await signAuthorization(f, { key: accounts.poor.privateKey, from: accounts.payer.address })), {
      invalidReason: 'invalid_exact_evm_signature',
    }],
  ]
  for (const [name, body, expected] of cases) {
    const res = await verify(body)
    t.equal(res.status, 200, `${name}: 200`)
    t.match(res.json(), { isValid: false, payer: accounts.payer.address, ...expected }, name)
  }

  const poor = bodyV2(reqs, await signAuthorization(f, { key: accounts.poor.privateKey }))
  const shortVerify = await verify(poor)
  t.equal(shortVerify.status, 200)
  t.same(shortVerify.json(), {
    isValid: false, invalidReason: 'invalid_exact_evm_insufficient_balance', invalidMessage: 'ERC20: transfer amount exceeds balance',
    payer: accounts.poor.address, details: { balance: '0', required: price },
  }, 'insufficient balance: the spec text is the invalidMessage')
  const shortSettle = await settle(poor)
  t.equal(shortSettle.status, 200)
  t.same(shortSettle.json(), {
    success: false, errorReason: 'invalid_exact_evm_insufficient_balance', errorMessage: 'ERC20: transfer amount exceeds balance',
    payer: accounts.poor.address, transaction: '', network: 'eip155:84532', details: { balance: '0', required: price },
  }, 'and the errorMessage of settle')

  const used = bodyV2(reqs, await signAuthorization(f))
  t.match((await settle(used)).json(), { success: true })
  const reuse = bodyV2(reqs, await signAuthorization(f, { nonce: used.paymentPayload.payload.authorization.nonce }))
  t.match((await verify(reuse)).json(), {
    isValid: false, invalidReason: 'invalid_exact_evm_nonce_already_used', payer: accounts.payer.address,
  }, 'used nonce (another signature over the same nonce)')
})

t.test('malformed, empty and non-JSON bodies', async (t) => {
  const signed = await signAuthorization(f)
  const noSignature = bodyV2(requirementsV2(f), { authorization: signed.authorization } as any)
  const malformed = await verify(noSignature)
  t.equal(malformed.status, 400)
  t.same(malformed.json(), {
    isValid: false, invalidReason: 'invalid_payload', invalidMessage: 'paymentPayload.payload.signature is required',
    payer: accounts.payer.address, details: { field: 'paymentPayload.payload.signature' },
  })
  const badNonce = bodyV2(requirementsV2(f), { ...signed, authorization: { ...signed.authorization, nonce: '0x12' } })
  const settleMalformed = await settle(badNonce)
  t.equal(settleMalformed.status, 400)
  t.match(settleMalformed.json(), { success: false, errorReason: 'invalid_payload', transaction: '', network: 'eip155:84532', errorMessage: /nonce must be 0x followed by 64 hex digits/ })
  const version = await verify({ x402Version: 3, paymentPayload: {}, paymentRequirements: {} })
  t.equal(version.status, 400)
  t.match(version.json(), { isValid: false, invalidReason: 'invalid_x402_version' })

  for (const endpoint of ['verify', 'settle']) {
    for (const headers of [{ 'content-type': 'application/json' }, {}] as Record<string, string>[]) {
      const empty = await call(at(endpoint), { method: 'POST', headers })
      t.equal(empty.status, 400, `${endpoint}: empty body`)
      t.same(empty.json(), { error: 'x402 request body is required', code: 'body_required' })
    }
  }
  const notJson = await call(at('verify'), { method: 'POST', body: '{"x402Version":', headers: { 'content-type': 'application/json' } })
  t.equal(notJson.status, 400)
  t.match(notJson.json(), { code: 'invalid_json', error: /^request body is not valid JSON/ })
  const text = await call(at('settle'), { method: 'POST', body: 'hello', headers: { 'content-type': 'text/plain' } })
  t.equal(text.status, 415)
  t.same(text.json(), { error: 'content-type must be application/json, got text/plain', code: 'unsupported_media_type' })
})

t.test('auth: a project without x402 gets 403 with the spec text; unknown keys 401', async (t) => {
  for (const endpoint of ['supported', 'verify']) {
    const res = await call(at(endpoint, KEY.mirror), endpoint === 'verify' ? { body: {} } : {})
    t.equal(res.status, 403)
    t.same(res.json(), { error: 'Unauthorized access to x402 facilitator service', code: 'forbidden' })
  }
  const unknown = await call(at('supported', fresh('nobody')))
  t.equal(unknown.status, 401)
  t.same(unknown.json(), { error: 'invalid API key', code: 'invalid_api_key' })
})

t.test('path segments and methods', async (t) => {
  const cases: ['GET' | 'POST', string, number, Record<string, string>][] = [
    ['GET', `${gw.url}/x402/foo/testnet/${KEY.x402}/supported`, 404, { code: 'unknown_chain', error: 'unknown chain "foo"; expected ethereum, polygon, base or solana' }],
    ['GET', `${gw.url}/x402/base/devnet/${KEY.x402}/supported`, 404, { code: 'unknown_network', error: 'unknown network "devnet"; expected mainnet or testnet' }],
    ['GET', at('status'), 404, { code: 'unknown_endpoint', error: 'unknown endpoint "status"; expected supported, verify, settle or health' }],
    ['GET', at('verify'), 405, { code: 'method_not_allowed', error: 'verify takes POST, not GET' }],
    ['POST', at('supported'), 405, { code: 'method_not_allowed', error: 'supported takes GET, not POST' }],
    ['GET', at('supported', KEY.x402, 'solana/testnet'), 501, { code: 'network_not_configured', error: 'solana/testnet is not configured on this gateway' }],
    ['GET', at('health', KEY.x402, 'ethereum/mainnet'), 501, { code: 'network_not_configured', error: 'ethereum/mainnet is not configured on this gateway' }],
    ['POST', at('verify', KEY.x402, 'polygon/testnet'), 501, { code: 'network_not_configured', error: 'polygon/testnet is not configured on this gateway' }],
  ]
  for (const [method, url, status, body] of cases) {
    const res = await call(url, { method, ...(method === 'POST' ? { body: await sdkBodyV2(f, payer) } : {}) })
    t.equal(res.status, status, `${method} ${url.replace(gw.url, '')}`)
    t.same(res.json(), body)
  }
  t.equal((await call(at('verify'), { method: 'GET' })).headers.allow, 'POST')
  const put = await call(at('verify'), { method: 'PUT', body: '{}' })
  t.equal(put.status, 405, 'methods the route does not take are refused by the core')
})

t.test('every request costs a credit; an exhausted project gets 402 credits_exhausted', async (t) => {
  for (let i = 0; i < 3; i++) t.equal((await call(at('supported', KEY.tiny))).status, 200)
  const exhausted = await call(at('supported', KEY.tiny))
  t.equal(exhausted.status, 402)
  t.match(exhausted.json(), { code: 'credits_exhausted', error: /project tiny has 0 of 3 credits left/ })
})

t.test('50 concurrent settles of one authorization through the gateway make exactly one transfer', async (t) => {
  const body = await sdkBodyV2(f, payer)
  const [payerBefore, payeeBefore] = await balances()
  const before = broadcastLines().length
  const answers = await Promise.all(Array.from({ length: 50 }, () => settle(body)))
  t.ok(answers.every((a) => a.status === 200), 'all 200')
  const results = answers.map((a) => a.json())
  t.ok(results.every((r) => r.success === true), results.map((r) => r.errorReason ?? 'ok').join(','))
  t.equal(new Set(results.map((r) => r.transaction)).size, 1, 'all with the one transaction hash')
  t.same(await balances(), [payerBefore - BigInt(price), payeeBefore + BigInt(price)], 'exactly one transfer on chain')
  await new Promise((resolve) => setTimeout(resolve, 100)) // let the log lines arrive
  t.equal(broadcastLines().length - before, 1, 'one broadcast')
})

t.test('a configured asset whose EIP-712 name differs from the chain fails the config', async (t) => {
  const dir = gw.dir
  const file = join(dir, 'wrong-asset.yaml')
  writeFileSync(file, x402Config([{ id: 'p', key: KEY.x402, scopes: ['x402'] }], (text) => text.replace('name: USDC, version: "2"', 'name: USD Coin, version: "2"')))
  const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
    execFile(process.execPath, [BIN, 'check', '-c', file], { env: { ...process.env, ...x402Env(f.chain), TOLLGATE_DATA_DIR: join(dir, 'check') } }, (error, _stdout, stderr) =>
      resolve({ code: error ? (error as any).code ?? 1 : 0, stderr }))
  })
  t.equal(code, 1)
  t.match(stderr, `base/testnet: eip155:84532 asset ${f.chain.token}: name is "USDC" on chain, configured "USD Coin"`)
  t.notMatch(stderr, f.chain.accounts.facilitator.privateKey.slice(2), 'the key is not printed')
})
