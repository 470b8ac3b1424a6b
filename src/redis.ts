// Entry point of panel-license-guard/redis: cluster mode's license store on node-redis 5 or ioredis.
export type { LicenseStore, StoreHealth } from './store/license-store.js';
export type { IORedisClient, NodeRedisClient, NodeRedisCluster, NodeRedisSubscriber, RedisClient } from './store/redis-connection.js';
export { type RedisLicenseStoreOptions, redisLicenseStore } from './store/redis-store.js';
