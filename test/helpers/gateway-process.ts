/**
 * Starts a real gateway process (`bin/tollgate.js start`) on 127.0.0.1 port 0 with a config
 * written to a temp dir, and reads its addresses from the startup log line.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { writeFileSync, renameSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { tempDir } from './temp.ts'

export const BIN = fileURLToPath(new URL('../../bin/tollgate.js', import.meta.url))

export interface GatewayProcess {
  url: string
  adminUrl: string
  dir: string
  configFile: string
  child: ChildProcess
  /** Every stdout+stderr line so far. */
  output: string[]
  /** Resolves with the exit code. */
  exited: Promise<number | null>
  /** Sends a signal and waits for exit. */
  stop(signal?: NodeJS.Signals): Promise<number | null>
  /** Writes a new config (atomically, by rename). */
  writeConfig(text: string): void
  /** Waits until a log line matches. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>
}

/** Gateways still running; killed when the test process exits (a timed-out test never reaches its teardown). */
const running = new Set<ChildProcess>()
const killRunning = () => {
  for (const child of running) child.kill('SIGKILL')
}
process.once('exit', killRunning)
// tap times a file out with SIGALRM and, 10 s later, kills it with SIGALRM again, with no 'exit'
// event: without this the timed-out file's gateways outlived the run (seen after a CI timeout).
// `once`: the second SIGALRM must still find no listener of ours and end the process.
process.once('SIGALRM', killRunning)

/**
 * `{{DIR}}` in the config text is replaced by the temp dir. `args` are appended to `start -c FILE`
 * (e.g. `['--workers', '2']`); `startTimeoutMs` bounds the wait for the start line (60 s: a loaded CI machine took 22 s on Node 24).
 */
export async function startGatewayProcess(
  configText: string,
  options: { env?: NodeJS.ProcessEnv; dir?: string; args?: string[]; startTimeoutMs?: number } = {},
): Promise<GatewayProcess> {
  const dir = options.dir ?? tempDir('tollgate-e2e-')
  const configFile = join(dir, 'gateway.yaml')
  const write = (text: string) => {
    writeFileSync(configFile + '.tmp', text.replaceAll('{{DIR}}', dir))
    // rename is atomic: the watcher never sees a half-written file
    renameSync(configFile + '.tmp', configFile)
  }
  write(configText)
  const child = spawn(process.execPath, [BIN, 'start', '-c', configFile, ...(options.args ?? [])], {
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const output: string[] = []
  const waiters: { pattern: RegExp; resolve: (line: string) => void }[] = []
  const onLine = (line: string) => {
    output.push(line)
    for (const waiter of [...waiters]) {
      if (waiter.pattern.test(line)) {
        waiters.splice(waiters.indexOf(waiter), 1)
        waiter.resolve(line)
      }
    }
  }
  for (const stream of [child.stdout!, child.stderr!]) {
    let buffer = ''
    stream.on('data', (chunk: Buffer) => {
      buffer += chunk.toString()
      let nl
      while ((nl = buffer.indexOf('\n')) !== -1) {
        onLine(buffer.slice(0, nl))
        buffer = buffer.slice(nl + 1)
      }
    })
  }
  running.add(child)
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      running.delete(child)
      resolve(code)
    }),
  )
  const waitFor = (pattern: RegExp, timeoutMs = 60000) =>
    new Promise<string>((resolve, reject) => {
      const found = output.find((line) => pattern.test(line))
      if (found) return resolve(found)
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${pattern}; output:\n${output.join('\n')}`)), timeoutMs)
      waiters.push({ pattern, resolve: (line) => (clearTimeout(timer), resolve(line)) })
      void exited.then((code) => {
        clearTimeout(timer)
        reject(new Error(`gateway exited (${code}) before ${pattern}; output:\n${output.join('\n')}`))
      })
    })
  let started: { address: string; admin: string }
  try {
    started = JSON.parse(await waitFor(/tollgate started/, options.startTimeoutMs))
  } catch (error) {
    // Never leave a gateway behind when it did not come up as expected.
    child.kill('SIGKILL')
    throw error
  }
  return {
    url: started.address,
    adminUrl: started.admin,
    dir,
    configFile,
    child,
    output,
    exited,
    waitFor,
    writeConfig: write,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      return exited
    },
  }
}
