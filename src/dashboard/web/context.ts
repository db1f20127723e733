/**
 * What every view gets: the API client, the shared fleet data, the live socket, the connection
 * monitor, the toasts and navigation. (Its own file so views and the shell do not import each
 * other.)
 */
import type { ApiClient } from '../../client/api-client.js';
import type { Route } from '../model/routes.js';
import type { ConnectionMonitor } from './core/connection.js';
import type { FleetService } from './core/fleet-service.js';
import type { LiveSocket } from './core/live-socket.js';
import type { Toasts } from './ui/toast.js';

export interface AppContext {
  readonly api: ApiClient;
  readonly toasts: Toasts;
  readonly fleet: FleetService;
  readonly live: LiveSocket;
  readonly monitor: ConnectionMonitor;
  /** Go to a hash route (re-renders when it is the current one). */
  navigate(hash: string): void;
}

export interface ViewInstance {
  readonly el: HTMLElement;
  /** For document.title. */
  readonly title: string;
  dispose?(): void;
}

/** Builds a view; `signal` aborts when the user navigates away (end polls, streams, sockets). */
export type ViewFactory = (app: AppContext, route: Route, signal: AbortSignal) => ViewInstance | Promise<ViewInstance>;
