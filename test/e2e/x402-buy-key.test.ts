/**
 * An agent buys an API key over x402 (EVM exact on the local hardhat chain, paid with the official
 * `@x402/fetch` wrapper and `@x402/evm`), calls a metered route with it, pays again (the same
 * project is topped up, the key keeps working), and replaces its key by signing a sign-in-with-x
 * challenge (EIP-4361 + EIP-191): the old key then answers 401. The agent's whole session —
 * requests and answers with their headers — is written to $BUY_KEY_TRANSCRIPT when set.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { x402Client } from '@x402/core/client'
import { decodePaymentResponseHeader, wrapFetchWithPayment } from '@x402/fetch'
import { ExactEvmScheme } from '@x402/evm/exact/client'
import { createSiweMessage } from 'viem/siwe'
import { privateKeyToAccount } from 'viem/accounts'
import type { LocalAccount } from 'viem'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'
import { tempDir } from '../helpers/temp.ts'
import { call } from '../helpers/x402.ts'
import { price, startFixture } from '../plugins/x402-facilitator/evm-helpers.ts'
import { buyKeyConfig, ORIGIN, recorder } from '../helpers/buy-key.ts'

t.setTimeout(600_000)

const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const CREDITS = 100
const f = await startFixture(84532)
const { accounts } = f.chain
t.teardown(() => f.close())

t.test('an agent buys a key on EVM, tops it up, and replaces it by signing in', async (t) => {
  const up: TestUpstream = await startTestUpstream()
  t.teardown(() => up.close())
  const gw: GatewayProcess = await startGatewayProcess(buyKeyConfig({
    upstream: up.url, store: `store: { dataDir: '{{DIR}}/data' }`, network: 'eip155:84532',
    asset: `{ address: "${f.chain.token}", name: USDC, version: "2", decimals: 6 }`, payTo: accounts.payee.address,
    rpcUrl: f.chain.rpcUrl, keyEnv: 'X402_FACILITATOR_KEY', chains: ['eip155:84532'], adminHash: hashCredential(ADMIN_TOKEN),
  }), { dir: tempDir('tollgate-buy-key-'), env: { X402_FACILITATOR_KEY: accounts.facilitator.privateKey }, startTimeoutMs: 90_000 })
  t.teardown(async () => {
    await gw.stop('SIGKILL')
  })
  const session: string[] = []
  const agentFetch = recorder(session)
  const account = privateKeyToAccount(accounts.payer.privateKey) as LocalAccount
  const wallet = new x402Client().register('eip155:84532', new ExactEvmScheme(account))
    .setSpendControls({ allowedAssets: [{ network: 'eip155:84532', asset: f.chain.token, maxAmountPerPayment: price }] })
  const pay = wrapFetchWithPayment(agentFetch, wallet)
  const intent = () => ({ 'x-buy-intent': randomBytes(24).toString('base64url') })
  const projectId = `wallet-${account.address.toLowerCase()}`
  const admin = async (path: string) => (await call(gw.adminUrl + path, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()
  const metered = async (key: string) => (await agentFetch(`${gw.url}/api/${key}/call`)).status

  const payeeBefore = await f.balanceOf(accounts.payee.address)
  const bought = await pay(`${gw.url}/keys/buy`, { method: 'POST', headers: intent() })
  t.equal(bought.status, 200, 'the official client pays and gets the key')
  const settle = decodePaymentResponseHeader(bought.headers.get('payment-response')!)
  t.match(settle, { success: true, network: 'eip155:84532', payer: account.address })
  const first = (await bought.json()) as any
  t.match(first, {
    project: projectId, wallet: account.address, key: /^tg_[A-Za-z0-9_-]{43}$/, label: /^x402-/, granted: CREDITS,
    grant: { id: `x402:eip155:84532:${settle.transaction}`, amount: CREDITS, payer: account.address, transaction: settle.transaction },
    balance: { allocation: 0, granted: CREDITS, used: 0, remaining: CREDITS },
  })
  t.equal(bought.headers.get('cache-control'), 'no-store', 'the key is not cached')
  t.equal(await f.balanceOf(accounts.payee.address), payeeBefore + BigInt(price), 'the payee got the price')
  const view = (await admin(`/admin/projects/${projectId}`)).project
  t.match(view, { id: projectId, source: 'runtime', plan: 'agent', scopes: ['rpc'], keys: [{ label: first.label, disabled: false }] }, 'an ordinary run-time project, seen by the admin API')
  t.equal(await metered(first.key), 200, 'the key works at once')

  const again = await pay(`${gw.url}/keys/buy`, { method: 'POST', headers: intent() })
  t.equal(again.status, 200)
  const second = (await again.json()) as any
  t.match(second, { project: projectId, key: null, granted: CREDITS, balance: { granted: 2 * CREDITS, used: 1, remaining: 2 * CREDITS - 1 } }, 'paying again tops up the same project')
  t.equal((await admin('/admin/projects')).projects.filter((p: any) => p.id.startsWith('wallet-')).length, 1, 'no second project')
  t.equal(await metered(first.key), 200, 'the first key keeps working')

  const challenged = await agentFetch(`${gw.url}/keys/rekey`, { method: 'POST' })
  t.equal(challenged.status, 401)
  const { info, supportedChains } = ((await challenged.json()) as any).extensions['sign-in-with-x']
  t.match(info, { domain: 'api.tollgate.test', uri: `${ORIGIN}/keys/rekey`, version: '1', nonce: /^[0-9a-f]{32}$/ }, 'the challenge is bound to the public origin, not the Host header')
  t.same(supportedChains, [{ chainId: 'eip155:84532', type: 'eip191' }])
  const fields = { ...info, address: account.address, chainId: 'eip155:84532', type: 'eip191' }
  const message = createSiweMessage({ ...info, address: account.address, chainId: 84532, issuedAt: new Date(info.issuedAt), expirationTime: new Date(info.expirationTime) })
  const header = Buffer.from(JSON.stringify({ ...fields, signature: await account.signMessage({ message }) })).toString('base64')
  const rekeyed = await agentFetch(`${gw.url}/keys/rekey`, { method: 'POST', headers: { 'sign-in-with-x': header } })
  t.equal(rekeyed.status, 200)
  const third = (await rekeyed.json()) as any
  t.match(third, { project: projectId, key: /^tg_/, label: /^siwx-/, disabled: [first.label] })
  t.equal(await metered(first.key), 401, 'the old key is disabled')
  t.equal(await metered(third.key), 200, 'the new key works, on the same credits')
  t.match((await admin(`/admin/projects/${projectId}/credits`)).balance, { granted: 2 * CREDITS, used: 3 })
  const audit = (await admin(`/admin/projects/${projectId}/audit`)).changes.map((c: any) => `${c.action} ${c.actor}`)
  t.same(audit.reverse(), [
    `project.create x402:${account.address}`, `key.add x402:${account.address}`, `key.add siwx:${account.address}`, `key.update siwx:${account.address}`,
  ], 'every change is in the audit trail, by the wallet')
  if (process.env.BUY_KEY_TRANSCRIPT) writeFileSync(process.env.BUY_KEY_TRANSCRIPT, session.join('\n'))
})
