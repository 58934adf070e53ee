/**
 * Compiles the example contracts with solc-js at run time.
 *
 * Why not commit ABI + bytecode: the artifacts would drift from the `.sol` sources unnoticed. Instead
 * the output is cached on disk keyed by a hash of the sources and the compiler settings, so only the
 * first run after a change pays for solc (a few seconds); later runs read one JSON file.
 * Cache location: `node_modules/.cache/tollgate-chain/` (or the OS temp dir when that is not writable).
 */
import { createHash } from 'node:crypto'
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Abi, Hex } from 'viem'

export interface CompiledContract {
  abi: Abi
  bytecode: Hex
}

export interface CompiledContracts {
  Eip3009Token: CompiledContract
  OwnerWallet1271: CompiledContract
  /** Test stand-in for Permit2's SignatureTransfer (runtime code goes to the canonical address). */
  Permit2Local: CompiledContract
  X402ExactPermit2ProxyLocal: CompiledContract
  X402UptoPermit2ProxyLocal: CompiledContract
}

const here = dirname(fileURLToPath(import.meta.url))
const contractsDir = join(here, 'contracts')
const sourceFiles = ['Eip3009Token.sol', 'OwnerWallet1271.sol', 'Permit2Local.sol', 'X402Permit2Proxies.sol'] as const
/** Prague is the newest fork both solc 0.8.37 and hardhat 2.29's EDR support well. */
const settings = {
  optimizer: { enabled: true, runs: 200 },
  evmVersion: 'prague',
  outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
}

function readSources(): Record<string, { content: string }> {
  const sources: Record<string, { content: string }> = {}
  for (const file of sourceFiles) sources[file] = { content: readFileSync(join(contractsDir, file), 'utf8') }
  return sources
}

function cacheDirs(): string[] {
  return [join(here, '..', '..', 'node_modules', '.cache', 'tollgate-chain'), join(tmpdir(), 'tollgate-chain-cache')]
}

function readCache(key: string): CompiledContracts | undefined {
  for (const dir of cacheDirs()) {
    try {
      return JSON.parse(readFileSync(join(dir, `${key}.json`), 'utf8')) as CompiledContracts
    } catch {
      // Not cached there; try the next place.
    }
  }
  return undefined
}

/** Written through a temp file and rename, so parallel test processes never read half a file. */
function writeCache(key: string, compiled: CompiledContracts): void {
  for (const dir of cacheDirs()) {
    try {
      mkdirSync(dir, { recursive: true })
      const temp = join(dir, `${key}.${process.pid}.tmp`)
      writeFileSync(temp, JSON.stringify(compiled))
      renameSync(temp, join(dir, `${key}.json`))
      return
    } catch {
      // Read-only location; try the next one. Without any cache we just compile again next time.
    }
  }
}

function runSolc(sources: Record<string, { content: string }>): CompiledContracts {
  const require = createRequire(import.meta.url)
  const solc = require('solc') as { compile(input: string): string }
  const output = JSON.parse(solc.compile(JSON.stringify({ language: 'Solidity', sources, settings }))) as {
    errors?: { severity: string; formattedMessage: string }[]
    contracts: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>>
  }
  const failures = (output.errors ?? []).filter((e) => e.severity === 'error')
  if (failures.length > 0) throw new Error(`solc failed:\n${failures.map((e) => e.formattedMessage).join('\n')}`)
  const pick = (file: string, name: string): CompiledContract => {
    const contract = output.contracts[file]?.[name]
    if (!contract) throw new Error(`solc output lacks ${file}:${name}`)
    return { abi: contract.abi, bytecode: `0x${contract.evm.bytecode.object}` }
  }
  return {
    Eip3009Token: pick('Eip3009Token.sol', 'Eip3009Token'),
    OwnerWallet1271: pick('OwnerWallet1271.sol', 'OwnerWallet1271'),
    Permit2Local: pick('Permit2Local.sol', 'Permit2Local'),
    X402ExactPermit2ProxyLocal: pick('X402Permit2Proxies.sol', 'X402ExactPermit2ProxyLocal'),
    X402UptoPermit2ProxyLocal: pick('X402Permit2Proxies.sol', 'X402UptoPermit2ProxyLocal'),
  }
}

/**
 * Returns ABI and creation bytecode of the example token and wallet, compiling only on a cache miss.
 *
 * @example
 * ```ts
 * const { Eip3009Token } = compileContracts()
 * const hash = await wallet.deployContract({ abi: Eip3009Token.abi, bytecode: Eip3009Token.bytecode, args })
 * ```
 */
export function compileContracts(): CompiledContracts {
  const sources = readSources()
  const key = createHash('sha256')
    .update(JSON.stringify({ sources, settings, solc: '0.8.37' }))
    .digest('hex')
    .slice(0, 24)
  const cached = readCache(key)
  if (cached) return cached
  const compiled = runSolc(sources)
  writeCache(key, compiled)
  return compiled
}
