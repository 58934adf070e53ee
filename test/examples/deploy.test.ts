/**
 * examples/deploy, validated: the Dockerfile's stages, user and healthcheck; the compose file's
 * services, healthchecks and shared store; the systemd unit (`systemd-analyze verify`); the
 * Prometheus config and alert rules (`promtool`); and that every metric the rules and the Grafana
 * dashboard query is one a running gateway really exports on /metrics.
 */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { readFileSync, existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parse, stringify } from 'yaml'
import { request } from 'undici'
import { hashCredential } from '../../core/projects/projects.ts'
import { coreSchema } from '../../core/config/schema.ts'
import { BIN, startGatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream } from '../helpers/upstream.ts'
import { tempDir } from '../helpers/temp.ts'

const DEPLOY = fileURLToPath(new URL('../../examples/deploy/', import.meta.url))
const read = (name: string) => readFileSync(DEPLOY + name, 'utf8')
const which = (tool: string) => spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0

t.test('Dockerfile: multi-stage, runs as a non-root user, healthcheck on /readyz', async (t) => {
  const lines = read('Dockerfile').split('\n').filter((line) => line.trim() && !line.trim().startsWith('#'))
  const stages = lines.map((line, i) => ({ line, i })).filter(({ line }) => /^FROM\s/i.test(line))
  t.ok(stages.length >= 2, `${stages.length} stages`)
  const final = lines.slice(stages.at(-1)!.i)
  t.ok(final.some((line) => /^COPY\s+--from=/i.test(line)), 'the final stage copies from the build stage')
  const user = final.filter((line) => /^USER\s/i.test(line)).at(-1)?.split(/\s+/)[1]
  t.ok(user && !['root', '0', '0:0'].includes(user), `the final stage runs as ${user}`)
  const healthcheck = final.find((line) => /^HEALTHCHECK\s/i.test(line))
  t.ok(healthcheck, 'the final stage has a HEALTHCHECK')
  t.match(final.join('\n'), /HEALTHCHECK[\s\S]*\/readyz/, 'it probes /readyz')
  t.notMatch(final.join('\n'), /apt-get install[^\n]*(g\+\+|make)/, 'no compiler in the runtime image')
})

t.test('compose: two gateways on the shared store, PostgreSQL and Redis, each with a healthcheck', async (t) => {
  const compose = parse(read('compose.yaml'), { merge: true }) as { services: Record<string, any> }
  const services = compose.services
  const gateways = Object.entries(services).filter(([, s]) => s.build?.dockerfile === 'examples/deploy/Dockerfile')
  t.equal(gateways.length, 2, `two gateway services (${gateways.map(([name]) => name).join(', ')})`)
  t.ok(Object.values(services).some((s: any) => /^postgres:/.test(s.image)), 'a PostgreSQL service')
  t.ok(Object.values(services).some((s: any) => /^redis:/.test(s.image)), 'a Redis service')
  for (const [name, service] of Object.entries(services)) t.ok(Array.isArray(service.healthcheck?.test), `${name} has a healthcheck`)
  for (const [name, gateway] of gateways) {
    t.match(gateway.environment.DATABASE_URL, /^postgres:\/\/.*@postgres:5432\//, `${name}: DATABASE_URL names the postgres service`)
    t.match(gateway.environment.REDIS_URL, /^redis:\/\/redis:6379/, `${name}: REDIS_URL names the redis service`)
    t.equal(gateway.depends_on.postgres.condition, 'service_healthy', `${name} waits for a healthy PostgreSQL`)
    t.equal(gateway.depends_on.redis.condition, 'service_healthy', `${name} waits for a healthy Redis`)
    t.match(gateway.healthcheck.test.join(' '), /\/readyz/, `${name}'s healthcheck probes /readyz`)
    const mount = (gateway.volumes as string[]).find((v) => v.endsWith(':/etc/tollgate/gateway.yaml:ro'))
    t.ok(mount && existsSync(DEPLOY + mount.split(':')[0]), `${name} mounts a config that exists`)
  }
  const ports = gateways.map(([, g]) => g.ports[0].split(':')[0])
  t.equal(new Set(ports).size, 2, 'the two gateways publish different host ports')
})

/** Seconds of a Prometheus duration (`30d`, `15m`, `1h30m`). */
function seconds(duration: string): number {
  const unit: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400, w: 604800, y: 31536000 }
  let total = 0
  for (const [, n, u] of duration.matchAll(/(\d+)(ms|s|m|h|d|w|y)/g)) total += Number(n) * unit[u]
  return total
}

t.test('compose: Prometheus keeps more than the longest alert window, on a volume; Alertmanager has one receiver', async (t) => {
  const compose = parse(read('compose.yaml'), { merge: true }) as { services: Record<string, any>; volumes: Record<string, unknown> }
  const prometheus = compose.services.prometheus
  const flag = (name: string) => (prometheus.command as string[]).find((arg) => arg.startsWith(`--${name}=`))?.split('=')[1]
  const retention = flag('storage.tsdb.retention.time')
  t.ok(retention, 'the retention is set, not the 15-day default')
  const rules = parse(read('alert-rules.yml')).groups.flatMap((g: any) => g.rules) as { expr: string; for?: string }[]
  const windows = rules.flatMap((rule) => [...rule.expr.matchAll(/\[(\w+)\]/g)].map((m) => m[1]).concat(rule.for ?? []))
  const longest = Math.max(...windows.map(seconds))
  t.ok(seconds(retention!) > longest, `retention ${retention} > the longest window or for: (${longest} s)`)
  const tsdb = flag('storage.tsdb.path') ?? '/prometheus'
  const volume = (prometheus.volumes as string[]).find((v) => v.endsWith(`:${tsdb}`))
  t.ok(volume && volume.split(':')[0] in compose.volumes, `Prometheus's ${tsdb} is a named volume`)
  for (const rule of rules) t.notMatch(rule.expr, /vector\(\d/, 'no hard-coded number stands in for a metric')

  const alertmanager = compose.services.alertmanager
  t.ok(alertmanager, 'an Alertmanager service')
  const mounted = (alertmanager.volumes as string[]).find((v) => v.includes(':/etc/alertmanager/alertmanager.yml'))
  t.ok(mounted && existsSync(DEPLOY + mounted.split(':')[0]), 'its config is mounted and exists')
  const config = parse(read('alertmanager.yml'))
  t.equal(config.receivers.length, 1, 'one receiver')
  t.equal(config.route.receiver, config.receivers[0].name, 'every alert goes to it')
  t.match(config.receivers[0].webhook_configs[0].url, /^https?:\/\//)
  const scrape = parse(read('prometheus.yml'))
  t.same(scrape.alerting.alertmanagers[0].static_configs[0].targets, ['alertmanager:9093'], 'Prometheus sends its alerts there')
})

t.test('compose: the healthcheck probes the configured admin port; .env.example names every variable compose needs', async (t) => {
  const compose = parse(read('compose.yaml'), { merge: true }) as { services: Record<string, any> }
  const gateway = compose.services['tollgate-a']
  const probe = gateway.healthcheck.test.join(' ')
  t.notMatch(probe, /127\.0\.0\.1:8081/, 'no hard-coded port')
  t.match(probe, /process\.env\.TOLLGATE_ADMIN_PORT/, 'the port the gateway was given')
  t.match(gateway.environment.TOLLGATE_ADMIN_PORT, /TOLLGATE_ADMIN_PORT/, 'which compose passes to it')
  t.match(parse(read('gateway.yaml')).admin.listen.port, /TOLLGATE_ADMIN_PORT/, 'and gateway.yaml listens on')
  const example = read('.env.example')
  const defined = new Set([...example.matchAll(/^([A-Z_]+)=/gm)].map((m) => m[1]))
  const used = new Set([...read('compose.yaml').matchAll(/\$\{([A-Z_]+)/g)].map((m) => m[1]))
  for (const name of used) t.ok(defined.has(name), `.env.example sets ${name}`)
})

t.test('the deploy config uses the shared store from the environment', async (t) => {
  const config = parse(read('gateway.yaml'))
  t.same(config.store, { engine: 'shared', postgres: '${DATABASE_URL}', redis: '${REDIS_URL}' })
  const engines = ((coreSchema.properties as any).store.properties.engine.enum ?? []) as string[]
  if (!engines.includes('shared')) return void t.pass('skipped', { skip: `tollgate check: this build's store engines are ${engines.join(', ')}; the shared engine is not merged yet` })
  const result = spawnSync(process.execPath, [BIN, 'check', '-c', DEPLOY + 'gateway.yaml'], {
    env: {
      ...process.env,
      DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/test',
      REDIS_URL: 'redis://127.0.0.1:6379/15',
      TOLLGATE_ADMIN_TOKEN_HASH: hashCredential('deploy-test-token'),
      TOLLGATE_MAIN_KEY_HASH: hashCredential('deploy-test-key'),
      NODE_RPC_URL: 'http://127.0.0.1:9',
      MIRROR_URL: 'http://127.0.0.1:9/api/v1',
    },
    encoding: 'utf8',
  })
  t.equal(result.status, 0, `tollgate check passes: ${result.stdout}${result.stderr}`)
})

t.test('systemd unit: systemd-analyze verify, hardening options', async (t) => {
  const unit = read('tollgate.service')
  for (const option of ['NoNewPrivileges=yes', 'ProtectSystem=strict', 'ProtectHome=yes', 'PrivateTmp=yes', 'CapabilityBoundingSet=', 'RestrictAddressFamilies=', 'SystemCallFilter=@system-service', 'User=tollgate', 'ExecReload=/bin/kill -HUP $MAINPID']) {
    t.ok(unit.split('\n').some((line) => line.startsWith(option)), option)
  }
  if (!which('systemd-analyze')) return void t.pass('skipped', { skip: 'systemd-analyze is not installed here' })
  const result = spawnSync('systemd-analyze', ['verify', DEPLOY + 'tollgate.service'], { encoding: 'utf8' })
  t.equal(result.status, 0, `systemd-analyze verify: ${result.stdout}${result.stderr}`)
  t.equal(result.stderr.trim(), '', 'no warning')
})

t.test('Prometheus: promtool accepts the scrape config and the alert rules', async (t) => {
  const rules = parse(read('alert-rules.yml'))
  const alerts = rules.groups.flatMap((g: any) => g.rules).filter((r: any) => r.alert).map((r: any) => r.alert)
  for (const wanted of ['TollgateHigh5xxRatio', 'TollgateUpstreamErrors', 'TollgateCreditsNearExhaustion', 'TollgateReloadFailed']) t.ok(alerts.includes(wanted), `alert ${wanted}`)
  if (!which('promtool')) return void t.pass('skipped', { skip: 'promtool is not installed (apt-get install prometheus); .ci/run installs it' })
  const check = (args: string[]) => spawnSync('promtool', args, { cwd: DEPLOY, encoding: 'utf8' })
  const rulesResult = check(['check', 'rules', 'alert-rules.yml'])
  t.equal(rulesResult.status, 0, `promtool check rules: ${rulesResult.stdout}${rulesResult.stderr}`)
  const configResult = check(['check', 'config', 'prometheus.yml'])
  t.equal(configResult.status, 0, `promtool check config: ${configResult.stdout}${configResult.stderr}`)
})

t.test('the rules and the Grafana dashboard query only metrics a running gateway exports', async (t) => {
  const up = await startTestUpstream()
  const key = 'deploy-metrics-key-0001'
  const gw = await startGatewayProcess(`version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 } }
store: { dataDir: '{{DIR}}/data' }
watch: false
projects:
  - { id: deploy, plan: enterprise, scopes: [rpc], credits: { allocation: 1000, period: month }, keys: [{ hash: ${hashCredential(key)} }] }
upstreams:
  echo: { url: '${up.url}' }
routes:
  - name: metered
    path: /rpc/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc } }
      - { name: rate-limit, config: { by: project, capacity: 100, refillPerSecond: 10 } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 1 } }
`, { startTimeoutMs: 60_000 })
  t.teardown(async () => {
    await gw.stop()
    await up.close()
  })
  for (const path of [`/rpc/${key}/ok`, '/rpc/wrong-key/denied', `/rpc/${key}/status/502`]) await (await request(gw.url + path)).body.text()
  const text = await (await request(`${gw.adminUrl}/metrics`)).body.text()
  const exported = new Set<string>()
  for (const match of text.matchAll(/^# TYPE (\S+) (\S+)/gm)) {
    exported.add(match[1])
    if (match[2] === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) exported.add(match[1] + suffix)
  }
  t.ok(exported.has('tollgate_http_requests_total'), 'the gateway exports its request counter')
  // The credit gauges the exhaustion alerts read: one series per metered project, from the store.
  const gauge = (name: string) => Number(text.match(new RegExp(`^${name}\\{project="deploy"\\} (\\S+)$`, 'm'))?.[1])
  t.equal(gauge('tollgate_project_credit_allocation'), 1000, 'allocation of project deploy')
  const balance = gauge('tollgate_project_credit_balance')
  t.ok(balance >= 998 && balance <= 999, `balance of project deploy after its metered requests: ${balance}`)

  const metricsIn = (expr: string) => [...expr.matchAll(/\b((?:tollgate|process|nodejs)_[a-z0-9_]+)\b/g)].map((m) => m[1])
  const rules = parse(read('alert-rules.yml')).groups.flatMap((g: any) => g.rules) as { expr: string; alert?: string; record?: string }[]
  for (const rule of rules) {
    for (const name of metricsIn(rule.expr)) t.ok(exported.has(name), `${rule.alert ?? rule.record}: ${name} is exported`)
  }
  const dashboard = JSON.parse(read('grafana-dashboard.json'))
  t.ok(dashboard.panels.length >= 8, `${dashboard.panels.length} panels`)
  if (which('promtool')) {
    // promtool parses PromQL only inside rules: check every dashboard query as a recording rule,
    // with Grafana's variables given values.
    const exprs = dashboard.panels.flatMap((panel: any) => panel.targets.map((target: { expr: string }) => target.expr))
    const dir = tempDir('tollgate-dashboard-')
    const rulesFile = join(dir, 'dashboard-queries.yml')
    writeFileSync(rulesFile, stringify({ groups: [{ name: 'dashboard', rules: exprs.map((expr: string, i: number) => ({ record: `dashboard:query_${i}`, expr: expr.replaceAll('$__rate_interval', '5m').replaceAll('$instance', '.*') })) }] }))
    const result = spawnSync('promtool', ['check', 'rules', rulesFile], { encoding: 'utf8' })
    t.equal(result.status, 0, `every dashboard query is valid PromQL: ${result.stdout}${result.stderr}`)
  }
  for (const panel of dashboard.panels) {
    const exprs = (panel.targets ?? []).map((target: { expr: string }) => target.expr) as string[]
    t.ok(exprs.length > 0, `panel "${panel.title}" has queries`)
    for (const expr of exprs) {
      const names = metricsIn(expr)
      t.ok(names.length > 0, `panel "${panel.title}" queries a tollgate metric`)
      for (const name of names) t.ok(exported.has(name), `panel "${panel.title}": ${name} is exported`)
    }
  }
})
