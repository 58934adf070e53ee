/**
 * README.md as a test, like doctests: its `sh` blocks run in order, in one shell (variables carry
 * over), against `npm start` on free ports. Every curl a README line promises a status for
 * (`# → 400`) must answer it; every other curl must answer below 500; every block must exit 0
 * under `set -eu` (an unset variable such as an undefined $ADMIN_TOKEN fails it). A block after
 * `<!-- readme-test: skip -->` is not run (long-running commands, interactive steps).
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { tempDir } from '../helpers/temp.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const README = readFileSync(join(ROOT, 'README.md'), 'utf8')

interface Block { line: number; code: string }

/** The runnable `sh` blocks, with their line in README.md. */
function shellBlocks(markdown: string): { run: Block[]; skipped: number } {
  const run: Block[] = []
  let skipped = 0
  const lines = markdown.split('\n')
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== '```sh') continue
    const end = lines.indexOf('```', i + 1)
    const previous = lines.slice(0, i).reverse().find((line) => line.trim() !== '')
    if (previous?.includes('readme-test: skip')) skipped++
    else run.push({ line: i + 1, code: lines.slice(i + 1, end).join('\n') })
    i = end
  }
  return { run, skipped }
}

/** Per curl invocation of a block, in order: the status its line promises, if any. */
function promises(code: string): (number | undefined)[] {
  const logical = code.replace(/\\\n/g, ' ').split('\n')
  const out: (number | undefined)[] = []
  for (const line of logical) {
    const calls = line.match(/(^|[\s(|;])curl\s/g)?.length ?? 0
    const promised = line.match(/#.*→\s*(\d{3})\b/)?.[1]
    for (let i = 0; i < calls; i++) out.push(i === calls - 1 && promised ? Number(promised) : undefined)
  }
  return out
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

t.test('README.md runs as written', { timeout: 900_000 }, async (t) => {
  const { run, skipped } = shellBlocks(README)
  t.ok(run.length >= 5, `${run.length} blocks to run, ${skipped} marked not runnable`)

  // npm start, on free ports: the gateway, its admin listener and every stand-in upstream.
  const ports: Record<string, number> = {}
  for (const name of ['gateway', 'admin', 'proof', 'tee', 'relay', 'rpc', 'mirrorMain', 'mirrorTest', 'evm', 'svm', 'oidc']) ports[name] = await freePort()
  const dir = tempDir('tollgate-readme-')
  const env = {
    ...process.env,
    TOLLGATE_PORT: String(ports.gateway),
    TOLLGATE_ADMIN_PORT: String(ports.admin),
    TOLLGATE_DATA_DIR: join(dir, 'data'),
    PROOF_SERVER_URL: `http://127.0.0.1:${ports.proof}`,
    PROOF_TEE_URL: `http://127.0.0.1:${ports.tee}`,
    PROOF_RELAY_URL: `http://127.0.0.1:${ports.relay}`,
    NODE_RPC_URL: `http://127.0.0.1:${ports.rpc}`,
    MIRROR_MAINNET_URL: `http://127.0.0.1:${ports.mirrorMain}/api/v1`,
    MIRROR_TESTNET_URL: `http://127.0.0.1:${ports.mirrorTest}/api/v1`,
    EVM_RPC_URL: `http://127.0.0.1:${ports.evm}`,
    SOLANA_RPC_URL: `http://127.0.0.1:${ports.svm}`,
    OIDC_ISSUER: `http://127.0.0.1:${ports.oidc}`,
  }
  const gateway = spawn('npm', ['start'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  let log = ''
  gateway.stdout.on('data', (chunk) => (log += chunk))
  gateway.stderr.on('data', (chunk) => (log += chunk))
  const exited = new Promise((resolve) => gateway.once('exit', resolve))
  t.teardown(async () => {
    // npm runs node under a shell: stop the whole process group it leads, by its id.
    try {
      process.kill(-gateway.pid!, 'SIGTERM')
    } catch {}
    await exited
  })
  const admin = `http://127.0.0.1:${ports.admin}`
  const deadline = Date.now() + 300_000
  for (;;) {
    const ready = await fetch(`${admin}/readyz`).then((res) => res.ok, () => false)
    if (ready) break
    if (gateway.exitCode !== null || Date.now() > deadline) return void t.fail(`npm start did not become ready:\n${log}`)
    await new Promise((resolve) => setTimeout(resolve, 500))
  }

  // The blocks run in a folder of their own (files they write stay out of the checkout) that
  // sees the checkout's entry points, so `npx tollgate` and `node --import tsx examples/…` work.
  const work = tempDir('tollgate-readme-work-')
  for (const entry of ['package.json', 'node_modules', 'bin', 'core', 'plugins', 'examples', 'gateway.yaml', 'tsconfig.json']) symlinkSync(join(ROOT, entry), join(work, entry))
  const script = [
    'set -eu',
    // Each curl reports its status on stderr, after its own output.
    `curl() { command curl -w '%{stderr}@@status %{http_code}\\n' "$@"; }`,
    ...run.map((block, i) => `echo "@@block ${i}" >&2\n${block.code.replaceAll('localhost:8080', `localhost:${ports.gateway}`).replaceAll('localhost:8081', `localhost:${ports.admin}`)}`),
    'echo "@@end" >&2',
  ].join('\n')
  writeFileSync(join(work, 'readme.sh'), script)
  const result = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const shell = spawn('bash', ['readme.sh'], { cwd: work, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    shell.stdout.on('data', (chunk) => (stdout += chunk))
    shell.stderr.on('data', (chunk) => (stderr += chunk))
    shell.on('close', (code) => resolve({ code, stdout, stderr }))
  })

  // Split stderr by block: the statuses of its curls, and where the script stopped.
  const byBlock = new Map<number, number[]>()
  let current = -1
  for (const line of result.stderr.split('\n')) {
    const block = line.match(/^@@block (\d+)$/)
    if (block) byBlock.set((current = Number(block[1])), [])
    const status = line.match(/@@status (\d{3})$/)
    if (status && current >= 0) byBlock.get(current)!.push(Number(status[1]))
  }
  t.equal(result.code, 0, `every block exits 0 (stopped in the block at README.md line ${run[current]?.line}):\n${result.stderr.slice(-3000)}`)
  t.match(result.stderr, /@@end/, 'the script ran to its end')
  let checked = 0
  run.forEach((block, i) => {
    const expected = promises(block.code)
    const got = byBlock.get(i) ?? []
    t.equal(got.length, expected.length, `README.md:${block.line}: ${expected.length} curl calls ran`)
    expected.forEach((want, j) => {
      if (want !== undefined) t.equal(got[j], want, `README.md:${block.line}: curl #${j + 1} answers ${want}, as the README says`)
      else t.ok(got[j] > 0 && got[j] < 500, `README.md:${block.line}: curl #${j + 1} answered ${got[j]}`)
      checked++
    })
  })
  t.comment(`${run.length} README blocks run (${skipped} skipped), ${checked} curl calls checked`)
})
