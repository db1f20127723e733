/**
 * The activity service other components use (provided as the `activity` service by the activity
 * component): the store, and ingest through the same validation the HTTP route applies, so what
 * sandboxd records about itself obeys the same metadata-only rules as what collectors post.
 */
import type { ActivityIngestAck } from '../wire/activity.js';
import { validateBatch, type ActivityScope } from './record.js';
import type { ActivityReadScope, ActivityStore } from './store.js';

declare module '../component/component.js' {
  interface Services {
    /** The activity store and self-ingest (src/activity/component.ts provides it). */
    activity: ActivityService;
  }
}

export interface ActivityServiceOptions {
  readonly store: ActivityStore;
  /** SVC_TENANT_ID and SVC_HOST_ID (or the host name): the scope of what sandboxd records itself. */
  readonly tenantId: string;
  readonly hostId: string;
}

export class ActivityService {
  readonly store: ActivityStore;
  readonly tenantId: string;
  readonly hostId: string;

  constructor(o: ActivityServiceOptions) {
    this.store = o.store;
    this.tenantId = o.tenantId;
    this.hostId = o.hostId;
  }

  /** Validates raw activity.event/v1 records against `scope` and stores them (as POST /api/v2/activity/ingest does). */
  ingest(scope: ActivityScope, events: readonly unknown[]): Promise<ActivityIngestAck> {
    return this.store.ingest(scope, validateBatch({ events }, scope));
  }

  /** The read scope of this host's tenant; host, instance and agent default to every value. */
  readScope(o: Partial<Omit<ActivityReadScope, 'tenant_id'>> = {}): ActivityReadScope {
    return { tenant_id: this.tenantId, host_id: o.host_id ?? '*', instance_id: o.instance_id ?? '*', agent_id: o.agent_id ?? '*' };
  }
}
