/**
 * GET /api/v1/container-images (spec 4.16): {images: [{ref, label, description, default?}]},
 * the curated catalog (src/vms/container-images.ts says where it comes from).
 */
import type { Router } from '../http/router.js';
import type { ContainerImage } from './container-images.js';

const SCHEMA = {
  type: 'object',
  properties: {
    images: {
      type: 'array',
      items: {
        type: 'object',
        properties: { ref: { type: 'string' }, label: { type: 'string' }, description: { type: 'string' }, default: { type: 'boolean' } },
        required: ['ref', 'label', 'description'],
      },
    },
  },
  required: ['images'],
};

export function registerContainerImageRoutes(router: Router, deps: { images: () => readonly ContainerImage[] }): void {
  router.add({
    method: 'GET',
    path: '/api/v1/container-images',
    responseSchema: SCHEMA,
    handler: () => ({ status: 200, json: { images: deps.images() } }),
  });
}
