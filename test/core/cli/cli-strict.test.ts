/**
 * The command line refuses what it does not understand. For every command, through the real bin:
 * `--help` prints that command's usage, exits 0 and starts nothing; a misspelt flag and a flag
 * without its value exit 2 naming the flag (and the nearest valid one), before any work is done.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { BIN } from '../../helpers/gateway-process.ts'
import { tempDir } from '../../helpers/temp.ts'

interface Run { code: number | null; stdout: string; stderr: string }

/** Runs the bin in an empty folder (no gateway.yaml to fall back on), stdin closed. */
function cli(cwd: string, args: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd, stdio: ['pipe', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
    child.stdin.end()
    // `start --help` that started a gateway would never exit: fail the test instead of hanging it.
    setTimeout(() => child.kill('SIGKILL'), 30_000).unref()
  })
}

/** Each command, a misspelling of one of its flags and the valid flag it should point to, and a value-taking flag. */
const MATRIX: { command: string[]; misspelt: string; meant: string; needsValue: string }[] = [
  { command: ['start'], misspelt: '--confg', meant: '--config', needsValue: '--workers' },
  { command: ['check'], misspelt: '--confg', meant: '--config', needsValue: '-c' },
  { command: ['schema'], misspelt: '--cofnig', meant: '--config', needsValue: '--config' },
  { command: ['hash-key'], misspelt: '--hepl', meant: '--help', needsValue: '' },
  { command: ['migrate'], misspelt: '--config-file', meant: '--config', needsValue: '-c' },
  { command: ['usage'], misspelt: '--projet', meant: '--project', needsValue: '--granularity' },
  { command: ['user', 'add'], misspelt: '--emali', meant: '--email', needsValue: '--role' },
  { command: ['user', 'passwd'], misspelt: '--mail', meant: '--email', needsValue: '--email' },
  { command: ['user', 'list'], misspelt: '--conifg', meant: '--config', needsValue: '-c' },
  { command: ['receipt', 'verify'], misspelt: '--key', meant: '--keys', needsValue: '--keys' },
  { command: ['receipt', 'public-key'], misspelt: '--envv', meant: '--env', needsValue: '--kid' },
]

t.test('every command: --help, a misspelt flag, a flag without its value', async (t) => {
  const dir = tempDir('tollgate-cli-strict-')
  for (const row of MATRIX) {
    const name = row.command.join(' ')
    await t.test(name, async (t) => {
      // The three runs of a row are independent: spawn them together.
      const [help, misspelt, missing] = await Promise.all([
        cli(dir, [...row.command, '--help']),
        cli(dir, [...row.command, row.misspelt, 'x']),
        cli(dir, row.needsValue ? [...row.command, row.needsValue] : row.command),
      ])
      t.equal(help.code, 0, `${name} --help exits 0`)
      t.match(help.stdout, new RegExp(`^Usage: tollgate ${name}\\b`), 'prints its own usage')
      t.match(help.stdout, /-h, --help/)
      t.equal(help.stderr, '', 'and nothing else (no gateway, no check, no table)')

      t.equal(misspelt.code, 2, `${name} ${row.misspelt} exits 2`)
      t.match(misspelt.stderr, `unknown option ${row.misspelt}`, 'names the flag')
      t.match(misspelt.stderr, `did you mean ${row.meant}?`, 'and the nearest valid one')
      t.equal(misspelt.stdout, '')

      t.equal(missing.code, 2, `${name} without a value exits 2`)
      t.match(missing.stderr, row.needsValue ? `option ${row.needsValue} needs a value` : 'the KEY argument is missing')
      t.equal(missing.stdout, '')
    })
  }
})

t.test('top level: --version, --help, unknown command, unknown flag', async (t) => {
  const dir = tempDir('tollgate-cli-strict-')
  const version = await cli(dir, ['--version'])
  t.equal(version.code, 0)
  t.match(version.stdout, /^\d+\.\d+\.\d+\n$/)
  const help = await cli(dir, ['--help'])
  t.equal(help.code, 0)
  for (const command of ['start', 'check', 'schema', 'hash-key KEY', 'migrate', 'usage', 'user add', 'user passwd', 'user list', 'receipt verify RECEIPT', 'receipt public-key']) t.match(help.stdout, `tollgate ${command}`)
  const typo = await cli(dir, ['strat'])
  t.equal(typo.code, 2)
  t.match(typo.stderr, 'unknown command "strat" (did you mean start?)')
  const flag = await cli(dir, ['--verison'])
  t.equal(flag.code, 2)
  t.match(flag.stderr, 'did you mean --version?')
  // A flag right after a value-taking one is not taken for its value.
  const ambiguous = await cli(dir, ['check', '-c', '--help-me'])
  t.equal(ambiguous.code, 2)
  t.match(ambiguous.stderr, 'option -c needs a value')
  const sub = await cli(dir, ['user', 'remove'])
  t.equal(sub.code, 2)
  t.match(sub.stderr, 'unknown subcommand "remove"')
})

t.test('a stray argument and a refused --password exit 2 and change nothing', async (t) => {
  const dir = tempDir('tollgate-cli-strict-')
  const config = join(dir, 'gateway.yaml')
  writeFileSync(config, `version: 1\nstore: { dataDir: '${join(dir, 'data')}' }\nupstreams: {}\nroutes: []\n`)
  const stray = await cli(dir, ['check', 'gateway.yaml'])
  t.equal(stray.code, 2)
  t.match(stray.stderr, 'unexpected argument "gateway.yaml"')
  const password = await cli(dir, ['user', 'add', '--email', 'a@example.org', '--role', 'operator', '--password', 'correct horse battery', '-c', config])
  t.equal(password.code, 2)
  t.match(password.stderr, '--password is refused')
  t.match(password.stderr, 'stdin')
  t.notMatch(password.stderr, 'correct horse', 'the password is not echoed back')
  const list = await cli(dir, ['user', 'list', '-c', config])
  t.equal(list.code, 0)
  t.equal(list.stdout, '', 'no account was created')
  const ok = await cli(dir, ['check', '-c', config])
  t.equal(ok.code, 0, ok.stderr)
  t.match(ok.stdout, 'gateway.yaml: ok')
})
