/*
 * The issuing protocol's per-node steps. Each script runs atomically on its
 * node, so "set the lock, then compare and store the proposal" cannot
 * interleave with another client's step on the same node. Fence values are
 * compared as Lua numbers (doubles): exact because tokens stay below 2^53.
 * Values go back as strings so Redis never truncates them.
 */
#include <fencing/fencing.h>

const char fencing_script_acquire[] =
    "local f = tonumber(redis.call('GET', KEYS[2]) or '0') or 0\n"
    "if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n"
    "  return {0, 0, string.format('%.0f', f), redis.call('GET', KEYS[1]) or '',\n"
    "          redis.call('PTTL', KEYS[1])}\n"
    "end\n"
    "local p = tonumber(ARGV[3])\n"
    "if p > f then\n"
    "  if ARGV[4] ~= '0' then redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])\n"
    "  else redis.call('SET', KEYS[2], ARGV[3]) end\n"
    "  return {1, 1, ARGV[3]}\n"
    "end\n"
    "return {1, 0, string.format('%.0f', f)}\n";

const char fencing_script_raise[] =
    "local f = tonumber(redis.call('GET', KEYS[1]) or '0') or 0\n"
    "local p = tonumber(ARGV[1])\n"
    "if p > f then\n"
    "  if ARGV[2] ~= '0' then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
    "  else redis.call('SET', KEYS[1], ARGV[1]) end\n"
    "  return {1, ARGV[1]}\n"
    "end\n"
    "return {0, string.format('%.0f', f)}\n";
