/**
 * Maps positions in tsx-compiled code back to the TypeScript source, so a CPU profile of a
 * process run through tsx names `core/proxy/pipeline.ts:handleRequest@83` instead of `…@1` (tsx
 * minifies whitespace, so every compiled function sits on line 1).
 *
 * tsx keeps each compiled module with its source map in its disk cache (`$TMPDIR/tsx-<uid>`);
 * for each source file the newest entry written no later than the profile is the one the
 * profiled process ran.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { SourceMap } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

interface CacheEntry {
  mtimeMs: number
  map: SourceMap
}

export type PositionMapper = (file: string, line: number, column: number) => number | undefined

/** Builds a mapper from (absolute source path, 0-based generated line/column) to a 1-based source line. */
export function tsxSourceMapper(notAfterMs: number, cacheDir = join(tmpdir(), `tsx-${process.getuid?.() ?? 0}`)): PositionMapper {
  const best = new Map<string, CacheEntry>()
  let names: string[] = []
  try {
    names = readdirSync(cacheDir)
  } catch {
    return () => undefined
  }
  for (const name of names) {
    const path = join(cacheDir, name)
    try {
      const mtimeMs = statSync(path).mtimeMs
      if (mtimeMs > notAfterMs) continue
      const text = readFileSync(path, 'utf8')
      if (!text.startsWith('{"code"')) continue
      const { map } = JSON.parse(text) as { map?: { sources?: string[] } }
      const source = map?.sources?.[0]
      if (!source || (best.get(source)?.mtimeMs ?? -1) >= mtimeMs) continue
      best.set(source, { mtimeMs, map: new SourceMap(map as ConstructorParameters<typeof SourceMap>[0]) })
    } catch {
      /* an entry being written, or not one of tsx's: skip it */
    }
  }
  return (file, line, column) => {
    const entry = best.get(file)?.map.findEntry(line, column) as { originalLine?: number } | undefined
    return entry?.originalLine === undefined ? undefined : entry.originalLine + 1
  }
}
