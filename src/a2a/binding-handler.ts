/**
 * The A2A core operations of the pty-ws.v1 binding (binding spec section 4), served over the
 * executor task store: SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask,
 * SubscribeToTask (+ Unsubscribe). src/sessions/binding/a2a.ts validates the frames and routes
 * them here. Decisions (README "A2A"):
 * - The tasks are the instance's (the agent behind the connection), not only the session's:
 *   ListTasks lists every task of the instance (the binding allows either; this is A2A core's scope).
 * - SendMessage answers once the command runs (`TASK_STATE_WORKING`), or when it ended if
 *   `configuration.blocking` is true.
 * - SendStreamingMessage answers `.Accepted {task_id}`, then TaskStatusUpdate frames (working,
 *   then the terminal state, `delta.final` true) to that connection.
 * - SubscribeToTask answers `.Accepted {current_sequence}`, then one TaskStatusUpdate with the
 *   task's current state at once (a reconnecting client needs no replay: states are snapshots;
 *   `replay_from` is accepted and not needed), then every change until the terminal one. On a
 *   task that has ended that first update is the last (final).
 * - A connection holds at most {@link kMaxSubscriptionsPerConnection} subscriptions.
 */
import { SvcError } from '../core/errors.js';
import type { ErrorCode } from '../sessions/binding/codes.js';
import {
  a2aAnswerFrame,
  taskStatusUpdateFrame,
  type A2aBindingHandler,
  type A2aConnection,
  type A2aRequest,
} from '../sessions/binding/a2a.js';
import { errorMessage } from '../util/error-message.js';
import type { A2aDispatcher } from './dispatch.js';
import { statusUpdateJson, taskJson } from './task-json.js';
import type { A2aTaskStore, TaskSnapshot } from './task-store.js';
import { isTerminal, parseMessage, TASK_STATES, type TaskState } from './wire.js';

export const kMaxSubscriptionsPerConnection = 64;
export const kDefaultPageSize = 50;

export interface BindingOpsOptions {
  readonly store: A2aTaskStore;
  readonly dispatcher: A2aDispatcher;
  /** The instance id of an agent (the registry's instance_id, or the agent id). */
  readonly instanceOf: (agentId: string) => string | undefined;
  readonly logger?: { warn(obj: object, msg?: string): void };
}

/** SvcError codes → the binding's Error codes. */
function bindingCode(err: unknown): ErrorCode {
  if (!(err instanceof SvcError)) return 'INTERNAL';
  switch (err.code) {
    case 'a2a.task_not_found':
      return 'TASK_NOT_FOUND';
    case 'a2a.task_not_cancelable':
      return 'TASK_NOT_CANCELABLE';
    case 'request.invalid':
      return 'INVALID_REQUEST';
    case 'a2a.store_full':
      return 'RATE_LIMITED';
    default:
      return 'INTERNAL';
  }
}

function stateFilter(v: unknown): TaskState | undefined | null {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') return null;
  const s = v.startsWith('TASK_STATE_') ? v.slice('TASK_STATE_'.length).toLowerCase().replace('_', '-') : v;
  return (TASK_STATES as readonly string[]).includes(s) ? (s as TaskState) : null;
}

export class A2aBindingOps implements A2aBindingHandler {
  readonly #o: BindingOpsOptions;
  /** Per connection: task id → unsubscribe. */
  readonly #subs = new Map<number, Map<string, () => void>>();

  constructor(o: BindingOpsOptions) {
    this.#o = o;
  }

  handle(conn: A2aConnection, req: A2aRequest): void {
    const instanceId = conn.instanceId ?? (conn.agentId !== undefined ? this.#o.instanceOf(conn.agentId) : undefined);
    if (instanceId === undefined) return conn.error('INVALID_REQUEST', 'this session has no agent to run A2A tasks on', req.id);
    try {
      this.#handle(conn, instanceId, req);
    } catch (err) {
      conn.error(bindingCode(err), errorMessage(err), req.id);
    }
  }

  closed(connId: number): void {
    const subs = this.#subs.get(connId);
    if (subs === undefined) return;
    for (const off of subs.values()) off();
    this.#subs.delete(connId);
  }

  #handle(conn: A2aConnection, instanceId: string, req: A2aRequest): void {
    const { store, dispatcher } = this.#o;
    const answer = (op: string, payload: Record<string, unknown>): void => conn.send((seq) => a2aAnswerFrame(op, req.id, seq, payload));
    const task = (taskId: string): TaskSnapshot => {
      const t = store.get(instanceId, taskId);
      if (t === undefined)
        throw new SvcError('a2a.task_not_found', `no task ${JSON.stringify(taskId.slice(0, 128))} on instance ${instanceId}`);
      return t;
    };
    switch (req.op) {
      case 'SendMessage':
      case 'SendStreamingMessage': {
        const m = parseMessage(req.payload.message);
        if (typeof m === 'string') return conn.error('INVALID_REQUEST', m, req.id);
        const t = dispatcher.prepare(instanceId, m);
        if (req.op === 'SendStreamingMessage') {
          answer('SendStreamingMessage.Accepted', { task_id: t.id });
          this.#subscribe(conn, t.id);
          this.#start(conn, req.id, t, undefined);
          return;
        }
        const blocking = req.payload.configuration?.['blocking'] === true;
        this.#start(conn, req.id, t, (done) => answer('SendMessage.Response', { task: taskJson(done) }), blocking);
        return;
      }
      case 'GetTask':
        return answer('GetTask.Response', { task: taskJson(task(req.payload.task_id), req.payload.history_length) });
      case 'ListTasks': {
        const f = req.payload.filter ?? {};
        const state = stateFilter(f['state'] ?? f['status']);
        if (state === null) return conn.error('INVALID_REQUEST', 'ListTasks filter.state is not an A2A task state', req.id);
        const ctx = f['context_id'] ?? f['contextId'];
        if (ctx !== undefined && typeof ctx !== 'string')
          return conn.error('INVALID_REQUEST', 'ListTasks filter.context_id must be a string', req.id);
        const page = store.list(instanceId, {
          pageSize: req.payload.page_size ?? kDefaultPageSize,
          pageToken: req.payload.page_token ?? undefined,
          contextId: ctx,
          state,
        });
        return answer('ListTasks.Response', { tasks: page.tasks.map((t) => taskJson(t, 0)), next_page_token: page.nextPageToken });
      }
      case 'CancelTask':
        return answer('CancelTask.Response', { task: taskJson(dispatcher.cancel(instanceId, req.payload.task_id)) });
      case 'SubscribeToTask': {
        const t = task(req.payload.task_id);
        conn.send((seq) => a2aAnswerFrame('SubscribeToTask.Accepted', req.id, seq, { current_sequence: seq }));
        this.#update(conn, t);
        if (!isTerminal(t.state)) this.#subscribe(conn, t.id);
        return;
      }
      case 'Unsubscribe': {
        task(req.payload.task_id);
        const subs = this.#subs.get(conn.connId);
        subs?.get(req.payload.task_id)?.();
        subs?.delete(req.payload.task_id);
        return answer('Unsubscribe.Response', {});
      }
    }
  }

  /** Starts a prepared task; `reply` gets the task once it runs (or ended, when `untilEnd`). */
  #start(conn: A2aConnection, requestId: string, t: TaskSnapshot, reply: ((t: TaskSnapshot) => void) | undefined, untilEnd = false): void {
    const { store, dispatcher } = this.#o;
    const ended = untilEnd
      ? new Promise<void>((resolve) => {
          const off = store.subscribe(t.id, (s) => {
            if (isTerminal(s.state)) {
              off();
              resolve();
            }
          });
        })
      : Promise.resolve();
    dispatcher
      .start(t)
      .then(async (now) => {
        await ended;
        reply?.(store.get(now.instanceId, now.id) ?? now);
      })
      .catch((err: unknown) => {
        this.#o.logger?.warn({ task: t.id, err: errorMessage(err) }, 'a2a task start failed');
        conn.error(bindingCode(err), errorMessage(err), requestId);
      });
  }

  #update(conn: A2aConnection, t: TaskSnapshot): void {
    conn.send((seq) => taskStatusUpdateFrame(seq, { task: taskJson(t), delta: statusUpdateJson(t) }));
  }

  #subscribe(conn: A2aConnection, taskId: string): void {
    let subs = this.#subs.get(conn.connId);
    if (subs === undefined) this.#subs.set(conn.connId, (subs = new Map<string, () => void>()));
    if (subs.has(taskId)) return;
    if (subs.size >= kMaxSubscriptionsPerConnection) {
      throw new SvcError('a2a.store_full', `a connection holds at most ${kMaxSubscriptionsPerConnection} task subscriptions`);
    }
    const mine = subs;
    const off = this.#o.store.subscribe(taskId, (t) => {
      this.#update(conn, t);
      if (isTerminal(t.state)) mine.delete(taskId);
    });
    mine.set(taskId, off);
  }
}
