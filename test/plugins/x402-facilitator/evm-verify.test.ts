/**
 * verify on a real local chain (Sepolia's chain id, so both `sepolia` and `eip155:11155111` are
 * served). Payments come from the official x402 SDK clients and from viem directly; where our
 * verdict should equal the reference's, the official facilitator runs on the same chain as oracle.
 */
import t, { type Test } from 'tap'
import { x402Facilitator } from '@x402/core/facilitator'
import { toFacilitatorEvmSigner } from '@x402/evm'
import { ExactEvmScheme as OfficialExactEvmFacilitator } from '@x402/evm/exact/facilitator'
import { concat, createWalletClient, encodeAbiParameters, http, parseAbi, publicActions, type Address, type Hex } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { checkAssetMetadata } from '../../../plugins/x402-facilitator/evm/assets.ts'
import { supportedKinds, resolveEvmNetwork, evmNetworkForPath } from '../../../plugins/x402-facilitator/evm/chains.ts'
import { checkEvmChainContext, createEvmChainContext } from '../../../plugins/x402-facilitator/evm/context.ts'
import { malformedRequestReasons } from '../../../plugins/x402-facilitator/evm/errors.ts'
import { verifyExact } from '../../../plugins/x402-facilitator/evm/verify.ts'
import {
  bodyV1, bodyV2, now, price, randomNonce, requirementsV1, requirementsV2, sdkBodyV1, sdkBodyV2, sdkSigner,
  signAuthorization, startFixture,
} from './evm-helpers.ts'

const f = await startFixture(11155111)
t.teardown(() => f.close())
const { accounts } = f.chain
const payer = sdkSigner(accounts.payer.privateKey)

/** The reference facilitator (@x402/evm 2.27) on the same chain. */
const officialAccount = privateKeyToAccount(accounts.facilitator.privateKey)
const officialClient = createWalletClient({
  account: officialAccount, chain: f.chain.viemChain, transport: http(f.chain.rpcUrl, { retryCount: 0 }),
}).extend(publicActions)
const official = new x402Facilitator().register(
  f.v2Network as `${string}:${string}`,
  new OfficialExactEvmFacilitator(toFacilitatorEvmSigner(Object.assign(officialClient, { address: officialAccount.address }) as any)),
)

async function expectInvalid(t: Test, body: unknown, reason: string, messagePart?: string | RegExp, parity = false) {
  const result = await verifyExact(f.ctx, body)
  t.equal(result.isValid, false, 'rejected')
  t.equal(result.invalidReason, reason, `reason ${reason}`)
  if (messagePart !== undefined) t.match(result.invalidMessage, messagePart)
  if (parity) {
    const b = body as any
    const reference = await official.verify(b.paymentPayload, b.paymentRequirements)
    t.equal(reference.isValid, false, 'the reference facilitator rejects it too')
  }
  return result
}

t.test('valid payments from the official SDK clients, v2 and v1, are accepted like the reference does', async (t) => {
  const v2 = await sdkBodyV2(f, payer)
  t.same(await verifyExact(f.ctx, v2), { isValid: true, invalidReason: null, payer: accounts.payer.address })
  t.equal((await official.verify(v2.paymentPayload, v2.paymentRequirements)).isValid, true)
  const v1 = await sdkBodyV1(f, payer)
  t.equal(v1.paymentPayload.network, 'sepolia')
  t.same(await verifyExact(f.ctx, v1), { isValid: true, invalidReason: null, payer: accounts.payer.address })
})

t.test('the spec shapes are accepted too: numeric times, CAIP-2 in v1, version only inside the payload', async (t) => {
  const signed = await signAuthorization(f)
  const numeric = { ...signed, authorization: { ...signed.authorization, validAfter: Number(signed.authorization.validAfter), validBefore: Number(signed.authorization.validBefore) } }
  t.equal((await verifyExact(f.ctx, bodyV2(requirementsV2(f), numeric))).isValid, true, 'numbers for validAfter/validBefore')
  t.equal((await verifyExact(f.ctx, bodyV1(requirementsV1(f, { network: f.v2Network }), signed))).isValid, true, 'v1 with eip155:<id>')
  const { x402Version, ...noTopVersion } = bodyV2(requirementsV2(f), signed)
  t.equal(x402Version, 2)
  t.equal((await verifyExact(f.ctx, noTopVersion)).isValid, true, 'x402Version taken from paymentPayload')
  const minimal = requirementsV2(f)
  delete minimal.extra
  delete minimal.maxTimeoutSeconds
  t.equal((await verifyExact(f.ctx, bodyV2(minimal, signed))).isValid, true, 'no extra: the configured EIP-712 domain is used')
})

t.test('scheme and network are bound to the requirements and to this chain', async (t) => {
  const signed = await signAuthorization(f)
  await expectInvalid(t, bodyV2(requirementsV2(f, { scheme: 'upto' }), signed), 'invalid_exact_evm_scheme', '"upto"')
  await expectInvalid(t, bodyV2(requirementsV2(f), signed, requirementsV2(f, { network: 'eip155:84532' })),
    'invalid_exact_evm_network_mismatch', /"eip155:84532" differs/, true)
  await expectInvalid(t, bodyV1(requirementsV1(f, { network: 'base-sepolia' }), signed),
    'invalid_exact_evm_network_mismatch', /not served here.*eip155:11155111 \("sepolia"\)/)
  await expectInvalid(t, bodyV1(requirementsV1(f), signed, 'polygon-amoy'), 'invalid_exact_evm_network_mismatch')
})

t.test('asset: only configured assets, with their EIP-712 domain, deployed, with EIP-3009', async (t) => {
  const stranger = '0x000000000000000000000000000000000000dEaD' as Address
  await expectInvalid(t, bodyV2(requirementsV2(f, { asset: stranger }), await signAuthorization(f)),
    'invalid_payment_requirements', /0x000000000000000000000000000000000000dEaD is not accepted/)
  await expectInvalid(t, bodyV2(requirementsV2(f, { extra: { name: 'USD Coin', version: '2' } }), await signAuthorization(f)),
    'invalid_exact_evm_token_name_mismatch', /"USD Coin".*"USDC"/)
  await expectInvalid(t, bodyV2(requirementsV2(f, { extra: { name: 'USDC', version: '1' } }), await signAuthorization(f)),
    'invalid_exact_evm_token_version_mismatch')
  // A context that (mis)configures an undeployed address and a contract without EIP-3009 as assets.
  const ctx = createEvmChainContext({
    network: f.v2Network, rpcUrl: f.chain.rpcUrl, signerPrivateKey: accounts.facilitator.privateKey,
    assets: [stranger, f.chain.wallet1271].map((address) => ({ address, name: 'USDC', version: '2', decimals: 6 })),
  })
  for (const [asset, reason] of [[stranger, 'asset_not_deployed_contract'], [f.chain.wallet1271, 'invalid_exact_evm_eip3009_not_supported']] as const) {
    const signed = await signAuthorization(f, { domain: { verifyingContract: asset } })
    const result = await verifyExact(ctx, bodyV2(requirementsV2(f, { asset }), signed))
    t.equal(result.invalidReason, reason)
  }
})

t.test('v2 accepted must equal the requirements', async (t) => {
  const signed = await signAuthorization(f)
  const result = await expectInvalid(t, bodyV2(requirementsV2(f), signed, requirementsV2(f, { amount: '1' })),
    'invalid_payment_requirements', 'paymentPayload.accepted.amount (1) differs from paymentRequirements.amount (10000)')
  t.same(result.details, { field: 'paymentPayload.accepted.amount', accepted: '1', required: price })
  await expectInvalid(t, bodyV2(requirementsV2(f), signed, requirementsV2(f, { payTo: accounts.poor.address })),
    'invalid_payment_requirements', /accepted\.payTo/)
})

t.test('bad signatures', async (t) => {
  const reqs = requirementsV2(f)
  const byOther = await signAuthorization(f, { key: accounts.poor.privateKey, from: accounts.payer.address })
  await expectInvalid(t, bodyV2(reqs, byOther), 'invalid_exact_evm_signature', /not made by authorization.from/, true)
  const otherChain = await signAuthorization(f, { domain: { chainId: 84532 } })
  await expectInvalid(t, bodyV2(reqs, otherChain), 'invalid_exact_evm_signature', undefined, true)
  const otherToken = await signAuthorization(f, { domain: { verifyingContract: f.chain.wallet1271 } })
  await expectInvalid(t, bodyV2(reqs, otherToken), 'invalid_exact_evm_signature', undefined, true)
  const tampered = await signAuthorization(f)
  await expectInvalid(t, bodyV2(reqs, { ...tampered, authorization: { ...tampered.authorization, value: '20000' } }),
    'invalid_exact_evm_signature', undefined, true)

  // The same signature with s flipped to the upper half recovers to the same key but is malleable.
  const good = await signAuthorization(f)
  const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n
  const s = BigInt(`0x${good.signature.slice(66, 130)}`)
  const v = Number.parseInt(good.signature.slice(130), 16)
  const flipped = `${good.signature.slice(0, 66)}${(n - s).toString(16).padStart(64, '0')}${(v === 27 ? 28 : 27).toString(16)}`
  await expectInvalid(t, bodyV2(reqs, { ...good, signature: flipped }), 'invalid_exact_evm_signature', /upper half/)

  await expectInvalid(t, bodyV2(reqs, { ...good, signature: good.signature.slice(0, 130) }),
    'invalid_exact_evm_payload_undeployed_smart_wallet', /64 bytes/)
  // ERC-6492 wrapper naming a factory, for a payer without code: we deploy nothing.
  const wrapped = concat([
    encodeAbiParameters([{ type: 'address' }, { type: 'bytes' }, { type: 'bytes' }],
      ['0x000000000000000000000000000000000000fac7', '0x12345678', good.signature as Hex]),
    '0x6492649264926492649264926492649264926492649264926492649264926492',
  ])
  await expectInvalid(t, bodyV2(reqs, { ...good, signature: wrapped }), 'eip6492_factory_not_allowed', /does not deploy/)
})

t.test('recipient, time window and amount, in the reference order', async (t) => {
  const reqs = requirementsV2(f)
  await expectInvalid(t, bodyV2(reqs, await signAuthorization(f, { to: accounts.poor.address })),
    'invalid_exact_evm_recipient_mismatch', /is not payTo/, true)
  await expectInvalid(t, bodyV2(reqs, await signAuthorization(f, { validBefore: now() - 10 })),
    'invalid_exact_evm_payload_authorization_valid_before', /expired/, true)
  await expectInvalid(t, bodyV2(reqs, await signAuthorization(f, { validBefore: now() + 3 })),
    'invalid_exact_evm_payload_authorization_valid_before', /less than 6 s/, true)
  await expectInvalid(t, bodyV2(reqs, await signAuthorization(f, { validAfter: now() + 3600 })),
    'invalid_exact_evm_payload_authorization_valid_after', /not valid before/, true)
  await expectInvalid(t, bodyV2(reqs, await signAuthorization(f, { value: '9999' })),
    'invalid_exact_evm_payload_authorization_value_mismatch', 'authorization.value 9999 differs from paymentRequirements.amount 10000', true)
  await expectInvalid(t, bodyV1(requirementsV1(f), await signAuthorization(f, { value: '10001' })),
    'invalid_exact_evm_authorization_value', /maxAmountRequired 10000/)
  // Both wrong: the recipient is reported first, as the reference does.
  await expectInvalid(t, bodyV2(reqs, await signAuthorization(f, { to: accounts.poor.address, value: '1' })),
    'invalid_exact_evm_recipient_mismatch')
})

t.test('on-chain preconditions: balance and nonce', async (t) => {
  const poor = await expectInvalid(t, bodyV2(requirementsV2(f), await signAuthorization(f, { key: accounts.poor.privateKey })),
    'invalid_exact_evm_insufficient_balance', undefined, true)
  t.equal(poor.invalidMessage, 'ERC20: transfer amount exceeds balance', 'the token\'s own words, as the spec shows them')
  t.same(poor.details, { balance: '0', required: price })
  t.equal(poor.payer, accounts.poor.address)

  // The payer cancels an authorization on chain (EIP-3009 cancelAuthorization) before it is used.
  const nonce = randomNonce()
  const payerAccount = privateKeyToAccount(accounts.payer.privateKey)
  const cancelSignature = await payerAccount.signTypedData({
    domain: { name: 'USDC', version: '2', chainId: f.chain.chainId, verifyingContract: f.chain.token },
    types: { CancelAuthorization: [{ name: 'authorizer', type: 'address' }, { name: 'nonce', type: 'bytes32' }] },
    primaryType: 'CancelAuthorization', message: { authorizer: payerAccount.address, nonce },
  })
  const wallet = createWalletClient({ account: payerAccount, chain: f.chain.viemChain, transport: http(f.chain.rpcUrl, { retryCount: 0 }) }).extend(publicActions)
  const hash = await wallet.writeContract({
    address: f.chain.token, abi: parseAbi(['function cancelAuthorization(address, bytes32, bytes)']),
    functionName: 'cancelAuthorization', args: [payerAccount.address, nonce, cancelSignature],
  })
  await wallet.waitForTransactionReceipt({ hash, pollingInterval: 20 })
  await expectInvalid(t, bodyV2(requirementsV2(f), await signAuthorization(f, { nonce })),
    'invalid_exact_evm_nonce_already_used', /already used or canceled/, true)
})

t.test('the simulation catches what the chain refuses and the checks could not see', async (t) => {
  // Our clock runs an hour ahead of the chain's: validAfter passes our check, not the token's.
  const skewed = { ...f.ctx, now: () => now() + 3600 }
  const signed = await signAuthorization(f, { validAfter: now() + 1800, validBefore: now() + 7200 })
  const result = await verifyExact(skewed, bodyV2(requirementsV2(f), signed))
  t.equal(result.invalidReason, 'invalid_exact_evm_payload_authorization_valid_after')
  t.equal(result.invalidMessage, 'FiatTokenV2: authorization is not yet valid')
})

t.test('malformed bodies give invalid_payload / invalid_x402_version naming the field (HTTP 400)', async (t) => {
  const good = bodyV2(requirementsV2(f), await signAuthorization(f))
  const cases: [string, unknown, string, string | RegExp][] = [
    ['not an object', 'hello', 'invalid_payload', 'body must be a JSON object'],
    ['empty object', {}, 'invalid_x402_version', 'x402Version must be 1 or 2, got nothing'],
    ['version 3', { ...good, x402Version: 3 }, 'invalid_x402_version', 'got 3'],
    ['versions disagree', { ...good, x402Version: 1 }, 'invalid_x402_version', 'paymentPayload.x402Version (2) differs from x402Version (1)'],
    ['v1 shape labelled v2', { ...good, paymentPayload: { ...good.paymentPayload, accepted: undefined } }, 'invalid_payload', 'paymentPayload.accepted is required'],
    ['no requirements', { ...good, paymentRequirements: undefined }, 'invalid_payload', 'paymentRequirements is required'],
    ['bad nonce', withAuth(good, { nonce: '0x1234' }), 'invalid_payload', 'paymentPayload.payload.authorization.nonce must be 0x followed by 64 hex digits'],
    ['bad from', withAuth(good, { from: 'alice' }), 'invalid_payload', /authorization\.from must be 0x followed by 40 hex digits/],
    ['value with sign', withAuth(good, { value: '-1' }), 'invalid_payload', /authorization\.value must be a decimal integer string/],
    ['value beyond uint256', withAuth(good, { value: '9'.repeat(78) }), 'invalid_payload', 'paymentPayload.payload.authorization.value does not fit uint256'],
    ['unknown authorization key', withAuth(good, { extra: 1 }), 'invalid_payload', 'paymentPayload.payload.authorization.extra is not allowed here'],
    ['signature not hex', { ...good, paymentPayload: { ...good.paymentPayload, payload: { ...good.paymentPayload.payload, signature: 'xyz' } } }, 'invalid_payload', /signature must be 0x/],
    ['amount as number', { ...good, paymentRequirements: { ...good.paymentRequirements, amount: 10000 } }, 'invalid_payload', 'paymentRequirements.amount must be of type string'],
  ]
  for (const [name, body, reason, message] of cases) {
    const result = await verifyExact(f.ctx, body)
    t.equal(result.invalidReason, reason, `${name}: ${reason}`)
    t.match(result.invalidMessage, message, `${name}: message names the field`)
    t.ok(malformedRequestReasons.has(result.invalidReason!), `${name}: answered with 400`)
  }
  const permit2 = { ...good, paymentPayload: { ...good.paymentPayload, payload: { signature: '0x00', permit2Authorization: {} } } }
  const refused = await verifyExact(f.ctx, permit2)
  t.equal(refused.invalidReason, 'invalid_payload', 'an empty Permit2 payload is malformed, not unsupported')
  t.match(refused.invalidMessage, 'paymentPayload.payload.permit2Authorization.from is required')
  t.equal((await verifyExact(f.ctx, withAuth(good, { extra: 1 }))).payer, accounts.payer.address, 'payer named even when malformed')
})

function withAuth(body: any, change: Record<string, unknown>) {
  const payload = body.paymentPayload.payload
  return { ...body, paymentPayload: { ...body.paymentPayload, payload: { ...payload, authorization: { ...payload.authorization, ...change } } } }
}

t.test('an unreachable RPC is our fault, reported without the RPC address', async (t) => {
  const ctx = createEvmChainContext({
    network: f.v2Network, rpcUrl: 'http://127.0.0.1:1/secret-path', signerPrivateKey: accounts.facilitator.privateKey,
    assets: f.ctx.assets,
  })
  const result = await verifyExact(ctx, bodyV2(requirementsV2(f), await signAuthorization(f)))
  t.equal(result.invalidReason, 'unexpected_verify_error')
  t.notMatch(result.invalidMessage, /127\.0\.0\.1|secret-path/)
  t.same(await checkEvmChainContext(ctx), ['RPC for eip155:11155111 is unreachable: HttpRequestError'])
})

t.test('start-up checks: chain id and asset metadata', async (t) => {
  t.same(await checkEvmChainContext(f.ctx), [])
  const wrongChain = createEvmChainContext({ network: 'base-sepolia', rpcUrl: f.chain.rpcUrl, signerPrivateKey: accounts.facilitator.privateKey })
  t.same(await checkEvmChainContext(wrongChain), ['RPC for eip155:84532 reports chain id 11155111'])
  const wrongName = await checkAssetMetadata(f.ctx.publicClient, { address: f.chain.token, name: 'USD Coin', version: '2', decimals: 6 })
  t.equal(wrongName.ok, false)
  t.same(wrongName.problems, ['name is "USDC" on chain, configured "USD Coin"'])
  t.same(wrongName.onChain, { name: 'USDC', version: '2', decimals: 6, hasCode: true })
  const nothing = await checkAssetMetadata(f.ctx.publicClient, { address: accounts.payee.address, name: 'USDC', version: '2', decimals: 6 })
  t.same(nothing.problems, [`no contract deployed at ${accounts.payee.address}`])
})

t.test('networks and the supported answer', async (t) => {
  t.equal(resolveEvmNetwork('sepolia')?.caip2, 'eip155:11155111')
  t.equal(resolveEvmNetwork('eip155:80002')?.v1Name, 'polygon-amoy')
  t.equal(evmNetworkForPath('base', 'testnet')?.chainId, 84532)
  t.equal(resolveEvmNetwork('eip155:43114'), undefined)
  t.same(supportedKinds([{ network: 'eip155:11155111', signers: [accounts.facilitator.address] }, { network: 'base', signers: [accounts.facilitator.address] }]), {
    kinds: [
      { x402Version: 1, scheme: 'exact', network: 'sepolia', extra: { assetTransferMethods: ['eip3009', 'permit2'] } },
      { x402Version: 2, scheme: 'exact', network: 'eip155:11155111', extra: { assetTransferMethods: ['eip3009', 'permit2'] } },
      { x402Version: 2, scheme: 'upto', network: 'eip155:11155111', extra: { facilitatorAddress: accounts.facilitator.address, assetTransferMethods: ['permit2'] } },
      { x402Version: 1, scheme: 'exact', network: 'base', extra: { assetTransferMethods: ['eip3009', 'permit2'] } },
      { x402Version: 2, scheme: 'exact', network: 'eip155:8453', extra: { assetTransferMethods: ['eip3009', 'permit2'] } },
      { x402Version: 2, scheme: 'upto', network: 'eip155:8453', extra: { facilitatorAddress: accounts.facilitator.address, assetTransferMethods: ['permit2'] } },
    ],
    extensions: [],
    signers: { 'eip155:*': [accounts.facilitator.address] },
  })
})
