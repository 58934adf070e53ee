/**
 * A purchase route is refused at load, not per request, when its chain cannot bind a payment to
 * its buyer: key-buy with action buy must sit behind x402-paywall with intentHeader.
 */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { BIN } from '../../helpers/gateway-process.ts'
import { buyKeyConfig } from '../../helpers/buy-key.ts'
import { tempDir } from '../../helpers/temp.ts'

const config = buyKeyConfig({
  upstream: 'http://127.0.0.1:9',
  store: '',
  network: 'eip155:84532',
  asset: '{ address: "0x036CbD53842c5426634e7929541eC2318f3dCF7e", name: USDC, version: "2", decimals: 6 }',
  payTo: '0x90F79bf6EB2c4f870365E785982E1f101E93b906',
  rpcUrl: 'http://127.0.0.1:9',
  keyEnv: 'KEY_BUY_TEST_SIGNER',
  chains: ['eip155:84532'],
  adminHash: 'sha256:' + '0'.repeat(64),
})
const env = { ...process.env, KEY_BUY_TEST_SIGNER: '0x' + '11'.repeat(32) }

function check(yaml: string) {
  const dir = tempDir('tollgate-key-buy-config-')
  writeFileSync(join(dir, 'gateway.yaml'), yaml)
  return spawnSync(process.execPath, [BIN, 'check', '-c', join(dir, 'gateway.yaml')], { encoding: 'utf8', env, timeout: 120_000 })
}

t.test('the purchase route as documented passes the check', async (t) => {
  const run = check(config)
  t.equal(run.status, 0, run.stdout + run.stderr)
})

t.test('without the paywall intentHeader, the check names the route and the missing field', async (t) => {
  const run = check(config.replace(/^\s*intentHeader: x-buy-intent\n/m, ''))
  t.equal(run.status, 1)
  t.match(run.stdout + run.stderr, /route buy-key: key-buy with action buy needs x402-paywall's intentHeader/)
})

t.test('without the paywall at all, the check says so', async (t) => {
  const withoutPaywall = config.replace(/    plugins:\n      - name: x402-paywall[\s\S]*?(?=  - name: rekey\n)/, '')
  t.not(withoutPaywall, config)
  const run = check(withoutPaywall)
  t.equal(run.status, 1)
  t.match(run.stdout + run.stderr, /key-buy with action buy must sit behind x402-paywall/)
})
