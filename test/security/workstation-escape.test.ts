/**
 * A hostile tenant with a workstation shell, against a real gateway process (started with the
 * facilitator's keys in its environment), a real OpenID provider and real sandboxed workstations.
 *
 * From inside (a shell over the gateway's WebSocket) every attempt must fail: read secrets from
 * the environment; read the data dir, gateway.yaml, another workstation's home or data; run as the
 * gateway's uid or 0; see the gateway's processes; connect to the gateway, the admin listener,
 * PostgreSQL (5432) and Redis (6379); exceed the process, memory, disk and /tmp caps; write outside
 * its home. From outside each must be refused: reach the workstation server without the gateway
 * (no TCP listener; its socket refuses other uids), a WebSocket upgrade with a foreign or no Origin,
 * a socket kept open after sign-out or after the feature is turned off (cut within 5 s, and the
 * workstation stopped). Last a real fork bomb: held at the cap, and delete still removes it all.
 *
 * On every driver: `process` (bubblewrap) and `docker` (a real engine, test/helpers/dockerd.ts). Each attempt prints ESC_<name>_=ESCAPED or =blocked; the
 * matrix is printed as a comment.
 */
import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { request } from 'undici'
import WebSocket from 'ws'
import { hashCredential } from '../../core/projects/projects.ts'
import { startLocalOidcProvider } from '../../examples/oidc-provider.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { signInThroughOidc } from '../helpers/oidc-sign-in.ts'
import { tempDir } from '../helpers/temp.ts'
import { dockerdUnavailable, startDockerd } from '../helpers/dockerd.ts'

const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const FACILITATOR_KEY = `fac_${randomBytes(16).toString('hex')}`
const LIMITS = { memoryMb: 256, processes: 64, diskMb: 64, tmpMb: 16 }

function config(issuer: string, driverYaml: string): string {
  return `
version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
workstations:
  dir: '{{DIR}}/workstations'
${driverYaml}
  creditsPerMinute: 1
  env: { EDITOR: vi }
  limits: { memoryMb: ${LIMITS.memoryMb}, processes: ${LIMITS.processes}, diskMb: ${LIMITS.diskMb}, tmpMb: ${LIMITS.tmpMb} }
  oidc: { issuer: '${issuer}', clientId: tollgate-workstations }
projects:
  - id: p1
    plan: enterprise
    credits: { allocation: 100000, period: month }
    features: { workstation: true }
    settings: { workstationOwner: { issuer: '${issuer}', subject: alice } }
    keys: [{ hash: ${hashCredential(`tk_${randomBytes(8).toString('hex')}`)} }]
  - id: p2
    plan: enterprise
    credits: { allocation: 100000, period: month }
    features: { workstation: true }
    settings: { workstationOwner: { issuer: '${issuer}', subject: bob } }
    keys: [{ hash: ${hashCredential(`tk_${randomBytes(8).toString('hex')}`)} }]
routes: []
`
}

async function admin(gw: GatewayProcess, method: 'GET' | 'POST' | 'DELETE' | 'PATCH', path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const answer = await request(`${gw.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  })
  return { status: answer.statusCode, body: await answer.body.json() }
}

async function until(what: string, probe: () => Promise<boolean> | boolean, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

/** The uid processes of a pid run as (real uid). */
function uidOfPid(pid: number): number | undefined {
  try {
    return Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1])
  } catch {
    return undefined
  }
}

/** PIDs on this host whose command line runs the workstation server for `homeMarker`. */
/** The uids this test's gateway claimed (`<workstations root>/<project>/uid` under its temp dir). */
function claimedUids(dir: string): Set<number> {
  const out = spawnSync('find', [dir, '-maxdepth', '5', '-type', 'f', '-name', 'uid'], { encoding: 'utf8' }).stdout
  return new Set(out.split('\n').filter(Boolean).map((file) => Number(readFileSync(file, 'utf8'))).filter(Number.isInteger))
}

/**
 * Terminal servers on the host. Other test files run workstations at the same time (tap runs files
 * in parallel), so a test keeps only those whose uid its own gateway claimed: `own`.
 */
function workstationPids(own?: Set<number>): number[] {
  const pids: number[] = []
  for (const entry of spawnSync('ls', ['/proc']).stdout.toString().split('\n')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (!readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('terminal-server.ts')) continue
      if (own && !own.has(uidOfPid(Number(entry)) ?? -1)) continue
      pids.push(Number(entry))
    } catch { /* gone */ }
  }
  return pids
}

interface Shell {
  socket: WebSocket
  output(): string
  /** Runs `attack` (a bash command that exits 0 when the attack worked); resolves 'ESCAPED' or 'blocked'. */
  attempt(name: string, attack: string, timeoutMs?: number): Promise<string>
  run(command: string, marker: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>
  closed: Promise<number>
}

async function openShell(gw: GatewayProcess, cookie: string, project = 'p1'): Promise<Shell> {
  const socket = new WebSocket(`${gw.url.replace('http', 'ws')}/workstations/${project}/pty`, { headers: { cookie, origin: gw.url } })
  let output = ''
  socket.on('message', (data) => (output += String(data)))
  const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now())))
  await new Promise((resolve, reject) => { socket.once('open', resolve); socket.once('error', reject); socket.once('unexpected-response', (_q, r) => reject(new Error(`upgrade refused: ${r.statusCode}`))) })
  const run = async (command: string, marker: RegExp, timeoutMs = 30_000) => {
    const from = output.length
    socket.send(Buffer.from(`${command}\n`))
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const match = output.slice(from).match(marker)
      if (match) return match
      if (Date.now() > deadline) throw new Error(`no ${marker} after ${command.slice(0, 80)}: ${JSON.stringify(output.slice(-400))}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  return {
    socket,
    output: () => output,
    run,
    closed,
    async attempt(name, attack, timeoutMs) {
      // The echoed command line has `""` inside the marker, so only the real output matches.
      const command = `if ( ${attack} ) >/dev/null 2>&1; then echo "ESC_${name}_=""ESCAPED"; else echo "ESC_${name}_=""blocked"; fi`
      return (await run(command, new RegExp(`ESC_${name}_=(ESCAPED|blocked)`), timeoutMs))[1]
    },
  }
}

const dockerMissing = dockerdUnavailable()

for (const driver of ['process', 'docker'] as const) {
  const skip = driver === 'docker' && dockerMissing && !process.env.CI ? dockerMissing : false
  t.test(`workstation escape attempts (driver ${driver})`, { skip }, (t) => escapeAttempts(t, driver))
}

async function escapeAttempts(t: Test, driver: 'process' | 'docker'): Promise<void> {
  t.setTimeout(600_000)
  let driverYaml = '  driver: process'
  if (driver === 'docker') {
    const engine = await startDockerd()
    t.teardown(() => engine.stop())
    driverYaml = `  driver: docker\n  docker: { socketPath: '${engine.socketPath}', image: '${engine.image}' }`
  }
  const idp = await startLocalOidcProvider()
  t.teardown(() => idp.close())
  const dir = tempDir('tollgate-ws-escape-')
  const gw = await startGatewayProcess(config(idp.issuer, driverYaml), {
    dir,
    startTimeoutMs: 90_000,
    env: { X402_FACILITATOR_KEY: FACILITATOR_KEY, X402_SOLANA_FACILITATOR_KEY: FACILITATOR_KEY },
  })
  idp.register({ clientId: 'tollgate-workstations', redirectUris: [`${gw.url}/workstations/_auth/callback`] })
  t.teardown(async () => {
    await admin(gw, 'DELETE', '/admin/projects/p1/workstation').catch(() => {})
    await admin(gw, 'DELETE', '/admin/projects/p2/workstation').catch(() => {})
    await until('deleted', async () => (await admin(gw, 'GET', '/admin/projects/p2/workstation')).body.state === 'absent', 60_000).catch(() => {})
    await gw.stop()
  })
  const matrix: [string, string][] = []
  // Printed even when an attempt aborts the test (run against the tree before the sandbox, say).
  t.teardown(() => console.log(`# escape matrix (driver ${driver}):\n${matrix.map(([name, result]) => `#   ${name.padEnd(34)} ${result}`).join('\n')}`))
  const expectBlocked = (name: string, result: string) => {
    matrix.push([name, result])
    t.equal(result, 'blocked', `inside: ${name}`)
  }

  const timings: string[] = []
  for (const project of ['p1', 'p2']) {
    const at = performance.now()
    t.equal((await admin(gw, 'POST', `/admin/projects/${project}/workstation/provision`)).status, 202)
    await until(`${project} ready`, async () => (await admin(gw, 'GET', `/admin/projects/${project}/workstation`)).body.state === 'ready')
    timings.push(`${project} provision → ready ${(performance.now() - at).toFixed(0)} ms`)
  }
  t.comment(timings.join('; '))

  const alice = await signInThroughOidc(`${gw.url}/workstations/p1/`, 'alice')
  const bob = await signInThroughOidc(`${gw.url}/workstations/p2/`, 'bob')
  // p2's tenant leaves a secret in its home; p1's tenant goes looking for it.
  const p2 = await openShell(gw, bob.cookie, 'p2')
  const p2Home = (await p2.run('echo p2-secret-$((1000+337)) > secret.txt; echo "AT""=$(readlink -f secret.txt)="', /AT=(\/\S+)=/))[1]
  t.equal(p2Home, '/home/workstation/secret.txt', 'a workstation sees its home at /home/workstation')
  p2.socket.close()

  const shell = await openShell(gw, alice.cookie)
  const port = (url: string) => new URL(url).port
  const gatewayPid = gw.child.pid!
  const gatewayUid = process.getuid!()

  const attack = async (name: string, command: string, timeoutMs?: number) => expectBlocked(name, await shell.attempt(name, command, timeoutMs))
  await attack('env_secret', `env | grep -q FACILITATOR || grep -qsa ${FACILITATOR_KEY} /proc/*/environ`)
  await attack('data_dir', `ls ${dir}/data || test -e ${dir}/data/tollgate.db`)
  await attack('gateway_yaml', `cat ${dir}/gateway.yaml`)
  await attack('other_home_host_path', `ls ${dir}/workstations/p2 || cat ${dir}/workstations/p2/home/secret.txt || grep -rqs p2-secret-1337 /run /home /mnt /srv /tmp /var`)
  await attack('other_home_in_sandbox', `grep -qs p2-secret-1337 ${p2Home}`)
  await attack('uid_gateway_or_root', `[ "$(id -u)" = 0 ] || [ "$(id -u)" = ${gatewayUid} ] || [ "$(id -g)" = 0 ]`)
  await attack('see_gateway_process', `grep -qs '[t]ollgate[.]js' /proc/*/cmdline || grep -qs '[t]ollgate[.]js' /proc/${gatewayPid}/cmdline`)
  await attack('docker_socket', 'test -S /var/run/docker.sock || test -S /run/docker.sock')
  for (const [name, target] of [['tcp_gateway', port(gw.url)], ['tcp_admin', port(gw.adminUrl)], ['tcp_postgres', '5432'], ['tcp_redis', '6379']]) {
    await attack(name, `timeout 3 bash -c 'exec 3<>/dev/tcp/127.0.0.1/${target}'`)
  }
  await attack('unix_postgres', 'test -S /var/run/postgresql/.s.PGSQL.5432')
  // Spawn 150 processes at once (the cap is 64): count what actually runs.
  await attack('process_cap', `node -e 'const cp=require("child_process");for(let i=0;i<150;i++){try{cp.spawn("sleep",["8"]).on("error",()=>{})}catch{}};setTimeout(()=>{process.exit(require("fs").readdirSync("/proc").filter(n=>/^\\d+$/.test(n)).length>=150?0:1)},1500)'`, 60_000)
  await shell.run('sleep 9; echo "waited""-done"', /waited-done/, 60_000)
  await attack('memory_cap', `node -e 'const a=[];for(let i=0;i<24;i++)a.push(Buffer.alloc(32<<20,1));console.log("all")' | grep -q all`, 60_000)
  await attack('disk_cap', `dd if=/dev/zero of=$HOME/fill bs=1M count=${LIMITS.diskMb + 40}; s=$(stat -c %s $HOME/fill); rm -f $HOME/fill; [ "$s" -ge ${(LIMITS.diskMb + 40) * 1048576} ]`, 60_000)
  await attack('tmp_cap', `dd if=/dev/zero of=/tmp/fill bs=1M count=${LIMITS.tmpMb + 16}; s=$(stat -c %s /tmp/fill); rm -f /tmp/fill; [ "$s" -ge ${(LIMITS.tmpMb + 16) * 1048576} ]`)
  await attack('write_outside_home', 'touch /usr/x || touch /etc/x || touch /x || touch /opt/x || touch /var/x || touch /root/x || touch /proc/sys/kernel/x')
  const alive = await shell.run('echo "still""-alive-$((6*7))"', /still-alive-42/)
  t.ok(alive, 'the shell survived every attempt (the caps hit the attacker, not the server)')

  // Outside, as the host sees it.
  const own = claimedUids(dir)
  t.equal(own.size, 2, 'the gateway claimed a uid per workstation')
  const pids = workstationPids(own)
  t.ok(pids.length >= 2, 'both workstation servers run')
  for (const pid of pids) {
    const uid = uidOfPid(pid)
    t.ok(uid !== undefined && uid !== 0 && uid !== gatewayUid, `workstation server ${pid} runs as uid ${uid}, neither root nor the gateway's`)
  }
  const uids = new Set(pids.map(uidOfPid))
  t.equal(uids.size, 2, 'each workstation has its own uid')
  const listening = ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((file) => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').slice(1) : []))
    .map((line) => line.trim().split(/\s+/)).filter((f) => f[3] === '0A' && uids.has(Number(f[7])))
  matrix.push(['outside_tcp_listener', listening.length ? 'ESCAPED' : 'blocked'])
  t.same(listening, [], 'no workstation listens on a TCP port')
  const healthz = (await request(`${gw.url}/workstations/p1/healthz`, { headers: { cookie: alice.cookie } }))
  t.equal(healthz.statusCode, 200)
  // The sockets the gateway proxies to (under runDir; before the sandbox there were none).
  const socketPath = spawnSync('find', ['/run/tollgate-workstations', `${dir}/workstations`, '-name', 'server.sock'], { encoding: 'utf8' }).stdout.trim().split('\n').filter(Boolean)
  await healthz.body.dump()
  t.ok(socketPath.length >= 1, 'the servers listen on unix sockets')
  for (const sock of socketPath) {
    const probe = spawnSync('setpriv', ['--reuid', '65534', '--regid', '65534', '--clear-groups', '--', process.execPath, '-e', `require('net').connect(${JSON.stringify(sock)}).on('connect',()=>{console.log('connected');process.exit(0)}).on('error',(e)=>{console.log(e.code);process.exit(0)})`], { encoding: 'utf8' })
    matrix.push([`outside_socket_other_uid`, probe.stdout.includes('connected') ? 'ESCAPED' : 'blocked'])
    t.notMatch(probe.stdout, /connected/, `another uid cannot connect to ${sock} (${probe.stdout.trim()})`)
  }

  for (const [name, origin] of [['foreign_origin', 'https://evil.example'], ['no_origin', undefined]] as const) {
    const socket = new WebSocket(`${gw.url.replace('http', 'ws')}/workstations/p1/pty`, { headers: { cookie: alice.cookie, ...(origin ? { origin } : {}) } })
    const status = await new Promise<number>((resolve) => {
      socket.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0))
      socket.on('open', () => { socket.close(); resolve(101) })
      socket.on('error', () => resolve(0))
    })
    matrix.push([`outside_${name}`, status === 101 ? 'ESCAPED' : 'blocked'])
    t.equal(status, 403, `a WebSocket with ${name.replace('_', ' ')} is refused`)
  }

  // Revocation: sign-out cuts the open socket within 5 s.
  const second = await signInThroughOidc(`${gw.url}/workstations/p1/`, 'alice')
  const kept = await openShell(gw, second.cookie)
  const signOutAt = Date.now()
  const out = await request(`${gw.url}/workstations/_auth/logout`, { method: 'POST', headers: { cookie: second.cookie, origin: gw.url } })
  t.equal(out.statusCode, 200)
  await out.body.dump()
  const cutAfter = await Promise.race([kept.closed.then((at) => at - signOutAt), new Promise<number>((resolve) => setTimeout(() => resolve(-1), 6_000))])
  matrix.push(['outside_socket_after_sign_out', cutAfter >= 0 && cutAfter <= 5_000 ? 'blocked' : 'ESCAPED'])
  t.ok(cutAfter >= 0 && cutAfter <= 5_000, `the signed-out session's socket was cut (${cutAfter} ms)`)

  // Revocation: the feature turned off cuts the socket and stops the workstation and its charges.
  const offAt = Date.now()
  const off = await admin(gw, 'PATCH', '/admin/projects/p1', { features: { workstation: false } })
  t.equal(off.status, 200, JSON.stringify(off.body))
  const cutOff = await Promise.race([shell.closed.then((at) => at - offAt), new Promise<number>((resolve) => setTimeout(() => resolve(-1), 6_000))])
  matrix.push(['outside_socket_after_feature_off', cutOff >= 0 && cutOff <= 5_000 ? 'blocked' : 'ESCAPED'])
  t.ok(cutOff >= 0 && cutOff <= 5_000, `turning the feature off cut the socket (${cutOff} ms)`)
  await until('p1 stopped', async () => (await admin(gw, 'GET', '/admin/projects/p1/workstation')).body.state === 'stopped', 15_000).catch(() => {})
  matrix.push(['outside_running_after_feature_off', (await admin(gw, 'GET', '/admin/projects/p1/workstation')).body.state === 'stopped' ? 'blocked' : 'ESCAPED'])
  t.comment(`feature off → stopped: ${Date.now() - offAt} ms`)
  const stopped = (await admin(gw, 'GET', '/admin/projects/p1/workstation')).body
  t.equal(stopped.history.at(-2).by, 'feature', 'stopped because the feature is off')
  const deleted = await admin(gw, 'DELETE', '/admin/projects/p1/workstation')
  t.equal(deleted.status, 202, 'an operator can still delete it')
  await until('p1 gone', async () => (await admin(gw, 'GET', '/admin/projects/p1/workstation')).body.state !== 'deleting', 60_000)

  // A real fork bomb in p2: held at the cap, the gateway unharmed, delete removes everything.
  const p2Again = await openShell(gw, bob.cookie, 'p2')
  p2Again.socket.send(Buffer.from(':(){ :|:& };:\n'))
  await new Promise((resolve) => setTimeout(resolve, 4_000))
  const p2Uid = [...uids].find((uid) => uid !== undefined && workstationPids(own).some((pid) => uidOfPid(pid) === uid))!
  const count = spawnSync('ps', ['-o', 'pid=', '-u', String(p2Uid)], { encoding: 'utf8' }).stdout.trim().split('\n').filter(Boolean).length
  matrix.push(['fork_bomb_past_cap', count > LIMITS.processes ? 'ESCAPED' : 'blocked'])
  t.ok(count <= LIMITS.processes, `the fork bomb is held at the cap: ${count} processes (cap ${LIMITS.processes})`)
  const health = await request(`${gw.url}/health`).catch(() => undefined)
  t.ok(health && health.statusCode < 500, 'the gateway still answers')
  await health?.body.dump()
  const deleteAt = performance.now()
  t.equal((await admin(gw, 'DELETE', '/admin/projects/p2/workstation')).status, 202)
  await until('p2 gone', async () => (await admin(gw, 'GET', '/admin/projects/p2/workstation')).body.state === 'absent', 60_000)
  t.comment(`delete (under a fork bomb) → gone: ${(performance.now() - deleteAt).toFixed(0)} ms`)
  const left = () => spawnSync('ps', ['-o', 'pid=,stat=,comm=', '-u', String(p2Uid)], { encoding: 'utf8' }).stdout.trim()
  await until('no process of p2', () => left() === '', 10_000).catch(() => {})
  t.equal(left(), '', 'no process of the workstation is left')

}
