/**
 * The application shell: top bar (navigation, fleet counts, connection pill), the reconnecting
 * banner, the view area and the toasts; and the hash router that mounts one view at a time. A
 * view gets an AbortSignal that fires when the user navigates away, so its polls, streams and
 * sockets end with it.
 */
import { ApiClient } from '../../client/api-client.js';
import { fleetSummaryText } from '../model/format.js';
import { parseRoute, sectionOf, type Route } from '../model/routes.js';
import type { AppContext, ViewFactory, ViewInstance } from './context.js';
import { ConnectionMonitor } from './core/connection.js';
import { FleetService } from './core/fleet-service.js';
import { LiveSocket } from './core/live-socket.js';
import { h, setText } from './dom.js';
import { Toasts } from './ui/toast.js';
import { emptyState } from './ui/widgets.js';
import { activityView } from './views/activity.js';
import { agentView } from './views/agent.js';
import { eventsView } from './views/events.js';
import { fleetView } from './views/fleet.js';
import { taskView } from './views/task.js';
import { tasksView } from './views/tasks.js';
import { errorMessage } from '../../util/error-message.js';

/**
 * The view of a route. Views are in the entry bundle (small, so the first render needs one
 * request), except the terminal: it brings xterm.js (~350 KB), a chunk loaded on first use.
 */
async function viewFor(route: Route): Promise<ViewFactory> {
  switch (route.view) {
    case 'fleet':
      return fleetView;
    case 'agent':
      return agentView;
    case 'terminal':
      return (await import('./views/terminal.js')).terminalView;
    case 'tasks':
      return tasksView;
    case 'task':
      return taskView;
    case 'events':
      return eventsView;
    case 'activity':
      return activityView;
    default:
      return (_app, r) => ({
        el: h(
          'div',
          { class: 'page' },
          emptyState(
            'Nothing here',
            `No view matches ${r.view === 'not-found' ? r.hash : ''}.`,
            h('a', { class: 'btn', href: '#/' }, 'Go to the fleet'),
          ),
        ),
        title: 'Not found',
      });
  }
}

export function startApp(root: HTMLElement): AppContext {
  const api = new ApiClient({ baseUrl: '' });
  const toasts = new Toasts();
  const live = new LiveSocket(api);
  const monitor = new ConnectionMonitor(live);
  const fleet = new FleetService(api, live, {
    onPollError: (err, delayMs) => monitor.apiFailed(err, delayMs),
    onPollOk: () => monitor.apiOk(),
  });
  const app: AppContext = {
    api,
    toasts,
    fleet,
    live,
    monitor,
    navigate: (hash) => {
      if (location.hash === hash) void render();
      else location.hash = hash;
    },
  };
  monitor.onRetry = () => fleet.refresh();
  monitor.onRecovered = () => {
    toasts.success('Reconnected to sandboxd');
    fleet.refresh();
  };

  const navLinks = new Map<string, HTMLAnchorElement>([
    ['fleet', h('a', { href: '#/' }, 'Fleet')],
    ['tasks', h('a', { href: '#/tasks' }, 'Tasks')],
    ['events', h('a', { href: '#/events' }, 'Events')],
    ['activity', h('a', { href: '#/activity' }, 'Activity')],
  ]);
  const counts = h('span', { class: 'topbar-counts' });
  const main = h('main', { id: 'main', class: 'main', tabindex: '-1' });
  const shell = h(
    'div',
    { class: 'shell' },
    h('a', { class: 'skip-link', href: '#main', onclick: (ev: Event) => (ev.preventDefault(), main.focus()) }, 'Skip to content'),
    h(
      'header',
      { class: 'topbar' },
      h(
        'a',
        { class: 'brand', href: '#/', 'aria-label': 'sandboxd home' },
        h('span', { class: 'brand-mark', 'aria-hidden': 'true' }),
        'sandboxd',
      ),
      h('nav', { class: 'nav', 'aria-label': 'Main' }, ...navLinks.values()),
      h('div', { class: 'topbar-right' }, counts, monitor.pill),
    ),
    monitor.banner,
    main,
    toasts.el,
  );
  root.replaceChildren(shell);

  const renderCounts = (): void => {
    const ready = fleet.agents.countByStatus().get('Ready') ?? 0;
    const vmRunning = fleet.vms.filter((v) => v.state === 'running').length;
    setText(
      counts,
      fleetSummaryText({
        agentsLoaded: fleet.agents.loaded,
        agents: fleet.agents.size,
        ready,
        vmsLoaded: fleet.vmsLoaded,
        vms: fleet.vms.length,
        vmsRunning: vmRunning,
      }),
    );
  };
  fleet.changes.on(renderCounts);

  let current: { view: ViewInstance; ctl: AbortController } | null = null;
  let generation = 0;
  let firstRender = true;
  const render = async (): Promise<void> => {
    const gen = ++generation;
    const route = parseRoute(location.hash);
    const section = sectionOf(route);
    for (const [name, a] of navLinks) {
      if (name === section) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    if (current !== null) {
      current.ctl.abort();
      current.view.dispose?.();
      current = null;
    }
    const ctl = new AbortController();
    let view: ViewInstance;
    try {
      const factory = await viewFor(route);
      if (gen !== generation) return;
      view = await factory(app, route, ctl.signal);
    } catch (err) {
      if (gen !== generation) return;
      // A chunk that fails to load usually means the server now serves a newer build.
      const reload = h('button', { type: 'button', class: 'btn btn-primary', onclick: () => location.reload() }, 'Reload the page');
      view = { el: h('div', { class: 'page' }, emptyState('This view could not be loaded', errorMessage(err), reload)), title: 'Error' };
    }
    if (gen !== generation) {
      ctl.abort();
      view.dispose?.();
      return;
    }
    current = { view, ctl };
    main.replaceChildren(view.el);
    document.title = `${view.title} · sandboxd`;
    if (!firstRender) main.focus({ preventScroll: true });
    firstRender = false;
    window.scrollTo(0, 0);
  };
  window.addEventListener('hashchange', () => void render());

  live.start();
  fleet.start();
  void render();
  return app;
}
