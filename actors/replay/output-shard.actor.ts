/**
 * Actor module of the per-shard output service (listed in the ActorSystem's actorModules). The
 * main thread spawns one `output-shard` actor in every shard when the fanout starts: its spawn
 * argument configures the shard's replay settings (shard-replay.ts: ring size, budget,
 * retention), and its `stats` call reports the shard's replay numbers for the metrics.
 */
import { SvcError } from '../../src/core/errors.js';
import { OUTPUT_SHARD_ACTOR_TYPE } from '../protocol/output-calls.js';
import type { ActorFactory } from '../runtime/actor.js';
import { shardReplay } from './shard-replay.js';

export const actorTypes: Record<string, ActorFactory> = {
  [OUTPUT_SHARD_ACTOR_TYPE]: (ctx, init) => {
    shardReplay.configure(typeof init === 'object' && init !== null ? init : {});
    ctx.logger.info({ settings: shardReplay.settings }, 'replay settings of this shard');
    return {
      call(method) {
        if (method === 'stats') return shardReplay.stats();
        throw new SvcError('request.invalid', `output-shard has no method ${method}`);
      },
    };
  },
};
