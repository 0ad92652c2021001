// Responders' answers: request → ResponseService → status. A device answers with its device
// token (the deviceBearer hook in security.ts set req.deviceId); a user reads the responders.
import type { Responder, ResponseResult } from '../../domain/response.js';
import { caller } from '../security.js';
import { problems } from '../problem.js';
import type { Handler } from '../types.js';
import type { Context } from './context.js';

export class ResponseHandlers {
  constructor(private readonly ctx: Context) {}

  createIncidentResponse: Handler<'createIncidentResponse'> = async (req) => {
    const deviceId = req.deviceId;
    if (deviceId === undefined) throw problems.unauthorized();
    const { responseId, status, time } = req.body;
    const result = await this.ctx.responses.respond(deviceId, { responseId, incidentId: req.params.id, status, ...(time !== undefined ? { time } : {}) });
    req.log.info({ op: 'respond', deviceId, incidentId: req.params.id, status, accepted: result.accepted, reason: result.reason }, 'response decided');
    return result satisfies ResponseResult;
  };

  listIncidentResponders: Handler<'listIncidentResponders'> = async (req) =>
    (await this.ctx.responses.responders(caller(req).user, req.params.id)) satisfies Responder[];
}
