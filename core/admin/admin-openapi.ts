/**
 * The OpenAPI 3.1 document of the admin API, served at `GET /admin/openapi.json` (no credential:
 * it describes routes, it holds no data). Response schemas are strict enough that
 * test/e2e/accounts-openapi.test.ts validates real answers of every documented endpoint with ajv.
 *
 * Plugins' admin routes are documented here when the core ships them (usage of credit-meter).
 */

import { accountPaths, accountSchemas } from './admin-openapi/accounts.ts'
import { alertPaths, alertSchemas } from './admin-openapi/alerts.ts'
import { obj, type Schema } from './admin-openapi/common.ts'
import { creditPaths, creditSchemas } from './admin-openapi/credits.ts'
import { projectPaths, projectSchemas, settingsAuditPaths } from './admin-openapi/projects.ts'
import { configPaths, servicePaths } from './admin-openapi/service.ts'
import { workstationPaths, workstationSchemas } from './admin-openapi/workstations.ts'

// Each area (core/admin/admin-openapi/) holds its schemas and paths; the order of the spreads is the
// order of the served document, which clients and diffs of it see.
const schemas: Record<string, Schema> = {
  Error: obj({ error: obj({ code: { type: 'string', pattern: '^[a-z0-9_]+$' }, message: { type: 'string' } }) }),
  ...accountSchemas,
  ...projectSchemas,
  ...creditSchemas,
  ...alertSchemas,
  ...workstationSchemas,
}

const paths: Record<string, Record<string, unknown>> = {
  ...servicePaths,
  ...accountPaths,
  ...configPaths,
  ...projectPaths,
  ...creditPaths,
  ...alertPaths,
  ...workstationPaths,
  ...settingsAuditPaths,
}

const DOCUMENT = {
  openapi: '3.1.0',
  info: {
    title: 'tollgate admin API',
    version: '1',
    description:
      'Authenticated by the admin bearer token (an operator) or the tollgate_session cookie of POST /admin/session. ' +
      'A session request that changes state (POST, PATCH, DELETE) carries the x-csrf-token header. Owners reach only their projects. ' +
      'Audit entries name the authenticated principal as actor (the user, or admin-token); an x-admin-actor header (1 to 128 printable ASCII characters) only adds actorNote.',
  },
  components: {
    schemas,
    securitySchemes: {
      bearer: { type: 'http', scheme: 'bearer' },
      session: { type: 'apiKey', in: 'cookie', name: 'tollgate_session' },
    },
  },
  security: [{ bearer: [] }, { session: [] }],
  paths,
}

/** The document (one shared, frozen-by-convention object). */
export function adminOpenApi(): typeof DOCUMENT {
  return DOCUMENT
}
