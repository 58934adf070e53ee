/**
 * The admin OpenAPI document: a project's cloud workstation (core/workstations/admin-routes.ts).
 */
import { errorAnswer, idParam, json, obj, projectErrors, ref, type Schema } from './common.ts'

const workstationErrors = {
  ...projectErrors,
  '400': errorAnswer('invalid_path: the project id is not valid percent-encoding'),
  '403': errorAnswer('workstation_not_enabled (features.workstation), csrf_*'),
}
const workstationAction = { '202': json(ref('Workstation'), 'Accepted: the transition runs in the background'), ...workstationErrors, '409': errorAnswer("the transition's refusal: workstation_exists, workstation_not_provisioned, workstation_deleting, ...") }

/** Component schemas of this area, in document order. */
export const workstationSchemas: Record<string, Schema> = {
  Workstation: obj(
    {
      projectId: { type: 'string' },
      state: ref('WorkstationState'),
      desired: { enum: ['running', 'stopped', 'deleted'] },
      reason: { type: 'string' },
      since: { type: 'integer', description: 'epoch ms' },
      openPath: { type: 'string', description: 'where a browser opens it on the public listener (state ready)' },
      lastActivityAt: { type: 'integer', description: 'epoch ms' },
      creditsCharged: { type: 'number' },
      history: {
        type: 'array',
        items: obj({ at: { type: 'integer' }, from: ref('WorkstationState'), to: ref('WorkstationState'), by: { type: 'string' }, reason: { type: 'string' } }, ['at', 'from', 'to', 'by']),
      },
    },
    ['projectId', 'state', 'creditsCharged', 'history'],
  ),
  WorkstationState: { enum: ['absent', 'provisioning', 'starting', 'ready', 'stopping', 'stopped', 'deleting', 'failed'] },
}

/** Paths of this area, in document order. */
export const workstationPaths: Record<string, Record<string, unknown>> = {
  '/admin/projects/{id}/workstation': {
    get: { summary: "The project's workstation: state, reason, history, open path", parameters: [idParam], responses: { '200': json(ref('Workstation')), ...workstationErrors } },
    delete: { summary: 'Delete the workstation (accepted; the record is gone once deleted)', parameters: [idParam], responses: workstationAction },
  },
  '/admin/projects/{id}/workstation/provision': { post: { summary: 'Provision the workstation (accepted)', parameters: [idParam], responses: workstationAction } },
  '/admin/projects/{id}/workstation/start': { post: { summary: 'Start a stopped workstation (accepted)', parameters: [idParam], responses: workstationAction } },
  '/admin/projects/{id}/workstation/stop': { post: { summary: 'Stop the workstation (accepted)', parameters: [idParam], responses: workstationAction } },
}
