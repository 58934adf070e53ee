/**
 * Pieces the x402 benches share: the local chain or SVM in a process of its own, and a closed-loop
 * throughput run.
 *
 * @example
 * ```ts
 * const { child, info } = await startWithKeys<ChainInfo>('../examples/chain/index.ts', 'chain')
 * const { rps } = await closedLoop(5000, 16, async (i) => (await verify(i)).ok)
 * ```
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/**
 * Runs an example script (path relative to bench/lib) with `--port 0 --with-keys` and resolves with
 * the JSON it prints: what it deployed and the keys of its accounts.
 */
export function startWithKeys<T>(scriptFromHere: string, label: string): Promise<{ child: ChildProcess; info: T }> {
  const script = fileURLToPath(new URL(scriptFromHere, import.meta.url))
  const child = spawn(process.execPath, ['--import', 'tsx', script, '--port', '0', '--with-keys'], { stdio: ['ignore', 'pipe', 'inherit'] })
  return new Promise((resolve, reject) => {
    let text = ''
    child.stdout!.on('data', (chunk: Buffer) => {
      text += chunk.toString()
      try {
        resolve({ child, info: JSON.parse(text) as T })
      } catch {
        // not complete yet
      }
    })
    child.once('exit', (code) => reject(new Error(`${label} process exited (${code})`)))
  })
}

/** Runs `task` from `concurrency` loops for `ms`; completed calls per second, failures and calls made. */
export async function closedLoop(ms: number, concurrency: number, task: (i: number) => Promise<boolean>): Promise<{ rps: number; failures: number; completed: number }> {
  const deadline = performance.now() + ms
  let done = 0
  let failures = 0
  let next = 0
  const started = performance.now()
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < deadline) {
      if (await task(next++)) done++
      else failures++
    }
  }))
  return { rps: done / ((performance.now() - started) / 1000), failures, completed: done + failures }
}
