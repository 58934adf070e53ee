// `node --import <checkout>/bin/register.js …` (or `--import tollgate/register` where the package is
// linked): TypeScript through tsx, plus the plugin hooks (core/proxy/plugin-hooks.js), so that a plugin's
// own tests, outside the checkout, load it and `tollgate/testing` the way the gateway does.
import { register as registerTsx } from 'tsx/esm/api'
import { register } from 'node:module'
registerTsx()
register(new URL('../core/proxy/plugin-hooks.js', import.meta.url))
