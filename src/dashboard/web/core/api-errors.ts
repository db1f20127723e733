/** Classifying API failures for what the views show. */
import { ApiError } from '../../../client/api-error.js';

/** True when an error means "this server has no such route" (a feature not wired in yet). */
export function isMissingRoute(err: unknown): boolean {
  return err instanceof ApiError && err.code === 'route.not_found';
}

/** True when no response came back (server down or restarting), as opposed to an error answer. */
export function isUnreachable(err: unknown): boolean {
  return err instanceof ApiError && err.status === 0;
}
