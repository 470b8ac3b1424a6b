// Types of bench/services.js, for the tests that import it.
export function redisAnswers(url: string): Promise<boolean>;
export function postgresAnswers(url: string): Promise<boolean>;
export function mysqlAnswers(url: string): Promise<boolean>;
