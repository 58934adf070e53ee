// `node --import <this file>`: writes the URL of every module the ESM loader loads (one a line) to
// the file named by TOLLGATE_MODULE_TRACE. Used by test/core/lazy-imports.test.ts to see which
// packages a gateway loads at start. The hook runs on the loader's own thread; it only appends.
import { register } from 'node:module'

if (process.env.TOLLGATE_MODULE_TRACE) register(new URL('./module-trace-hooks.mjs', import.meta.url), { data: process.env.TOLLGATE_MODULE_TRACE })
