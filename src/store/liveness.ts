/**
 * The defaults that make a lost runner lose nothing. A runner beats every {@link RUNNER_HEARTBEAT_SECONDS}: each
 * attempt with no span acknowledged for that long gets an `UpdateAttempt` heartbeat, and the runner itself sends
 * `UpdateWorker`. The store's watchdog treats six missed beats as a lost runner.
 */

/** How often a runner heartbeats, by default (attempts and the worker alike). */
export const RUNNER_HEARTBEAT_SECONDS = 5;

/**
 * `unresponsive_seconds` of a rollout whose config sets none: an attempt without a span or heartbeat for this long
 * is marked unresponsive (a SIGKILLed runner, a lost machine).
 */
export const DEFAULT_UNRESPONSIVE_SECONDS = 6 * RUNNER_HEARTBEAT_SECONDS;

/** A worker with no `UpdateWorker` heartbeat for this long is gone: marked unknown, its running attempts unresponsive. */
export const DEFAULT_WORKER_GONE_SECONDS = 6 * RUNNER_HEARTBEAT_SECONDS;

/**
 * Attempts a rollout with no `retry_condition` of its own gets when they end unresponsive (an infrastructure failure:
 * a dead runner, a killed worker thread), the first included. Its agent's own failures are not retried.
 */
export const INFRASTRUCTURE_ATTEMPTS = 3;
