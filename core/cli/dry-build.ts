/**
 * A dry build of a config, as `tollgate check` and `tollgate routes` make it: the config is loaded,
 * every plugin instantiated against a throw-away store, nothing listens. Errors are printed as
 * file:line:col and answered with exit code 1.
 *
 * @example
 * ```ts
 * const code = await withDryBuild('gateway.yaml', (table) => (console.log(table.routes.length), 0))
 * ```
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig, type LoadResult } from '../config/load.ts'
import { formatIssue } from '../config/source.ts'
import { reconcileUpstreams } from '../proxy/http/upstreams.ts'
import { createLogger } from '../proxy/log.ts'
import { CoreMetrics } from '../proxy/metrics.ts'
import { openSqliteStore } from '../store/sqlite.ts'
import { buildTable, type Table } from '../proxy/table.ts'

/** Builds `file` aside and hands the table to `use`; its answer is the exit code. */
export async function withDryBuild(
  file: string,
  use: (table: Table, loaded: LoadResult) => number | Promise<number>,
): Promise<number> {
  const loaded = await loadConfig(file)
  if (!loaded.config) {
    for (const issue of loaded.issues) console.error(formatIssue(issue))
    return 1
  }
  const scratch = mkdtempSync(join(tmpdir(), 'tollgate-dry-build-'))
  const store = openSqliteStore({ dataDir: scratch })
  const { current } = reconcileUpstreams(new Map(), loaded.config.upstreams)
  try {
    const built = await buildTable(loaded.config, {
      log: createLogger({ level: 'silent' }),
      metrics: new CoreMetrics(),
      store,
      upstreams: current,
      plugins: loaded.plugins,
      locate: loaded.locate,
    })
    if (!built.table) {
      for (const issue of built.issues) console.error(formatIssue(issue))
      return 1
    }
    await Promise.allSettled(built.table.instances.map((instance) => instance.close?.()))
    return await use(built.table, loaded)
  } finally {
    await Promise.allSettled([...current.values()].map((u) => u.pool.close()))
    await store.close()
    rmSync(scratch, { recursive: true, force: true })
  }
}
