/**
 * Hash routes of the single-page dashboard. The page itself is always `/` (so the server has one
 * HTML route and a reload keeps the view); the view lives in `location.hash`:
 *
 *   #/                                   fleet overview (agents and VMs)
 *   #/agents/{id}                        agent detail (system info, metrics, sessions)
 *   #/agents/{id}/sessions/{session}     terminal
 *   #/tasks                              tasks (submit, list)   ?state=running,failed
 *   #/tasks/{id}                         task detail (logs, artifacts)
 *   #/events                             events tail            ?type=vm.&agent=…&vm=…
 *   #/activity                           activity timeline      ?command_id=…&task_id=…&agent=…&since=…
 *
 * Ids are percent-encoded in the hash; an unknown hash is the `not-found` route.
 */

export type Route =
  | { readonly view: 'fleet' }
  | { readonly view: 'agent'; readonly agentId: string }
  | { readonly view: 'terminal'; readonly agentId: string; readonly sessionId: string }
  | { readonly view: 'tasks'; readonly query: URLSearchParams }
  | { readonly view: 'task'; readonly taskId: string }
  | { readonly view: 'events'; readonly query: URLSearchParams }
  | { readonly view: 'activity'; readonly query: URLSearchParams }
  | { readonly view: 'not-found'; readonly hash: string };

function decode(seg: string): string | null {
  try {
    const v = decodeURIComponent(seg);
    return v === '' ? null : v;
  } catch {
    return null;
  }
}

/** Parses `location.hash` (with or without the leading `#`). */
export function parseRoute(hash: string): Route {
  const h = hash.startsWith('#') ? hash.slice(1) : hash;
  const q = h.indexOf('?');
  const path = q < 0 ? h : h.slice(0, q);
  const query = new URLSearchParams(q < 0 ? '' : h.slice(q + 1));
  const segs = path.split('/').filter((s) => s !== '');
  const [a, , c] = segs;
  const id1 = segs[1] === undefined ? null : decode(segs[1]);
  const id3 = segs[3] === undefined ? null : decode(segs[3]);
  if (segs.length === 0 || (segs.length === 1 && a === 'fleet')) return { view: 'fleet' };
  if (a === 'agents' && segs.length === 2 && id1 !== null) return { view: 'agent', agentId: id1 };
  if (a === 'agents' && segs.length === 4 && c === 'sessions' && id1 !== null && id3 !== null) {
    return { view: 'terminal', agentId: id1, sessionId: id3 };
  }
  if (a === 'tasks' && segs.length === 1) return { view: 'tasks', query };
  if (a === 'tasks' && segs.length === 2 && id1 !== null) return { view: 'task', taskId: id1 };
  if (a === 'events' && segs.length === 1) return { view: 'events', query };
  if (a === 'activity' && segs.length === 1) return { view: 'activity', query };
  return { view: 'not-found', hash: `#${h}` };
}

const enc = encodeURIComponent;

/** Hrefs for links (always with the leading `#/`). */
export const href = {
  fleet: (): string => '#/',
  agent: (agentId: string): string => `#/agents/${enc(agentId)}`,
  terminal: (agentId: string, sessionId: string): string => `#/agents/${enc(agentId)}/sessions/${enc(sessionId)}`,
  tasks: (query?: URLSearchParams): string =>
    query !== undefined && [...query.keys()].length > 0 ? `#/tasks?${query.toString()}` : '#/tasks',
  task: (taskId: string): string => `#/tasks/${enc(taskId)}`,
  events: (query?: URLSearchParams): string =>
    query !== undefined && [...query.keys()].length > 0 ? `#/events?${query.toString()}` : '#/events',
  activity: (query?: URLSearchParams): string =>
    query !== undefined && [...query.keys()].length > 0 ? `#/activity?${query.toString()}` : '#/activity',
};

/** The top-level section a route belongs to (for the navigation highlight). */
export function sectionOf(route: Route): 'fleet' | 'tasks' | 'events' | 'activity' | null {
  switch (route.view) {
    case 'fleet':
    case 'agent':
    case 'terminal':
      return 'fleet';
    case 'tasks':
    case 'task':
      return 'tasks';
    case 'events':
      return 'events';
    case 'activity':
      return 'activity';
    default:
      return null;
  }
}
