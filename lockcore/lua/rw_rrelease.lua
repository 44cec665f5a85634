-- A reader leaves (a release or a rollback): its own member only.
-- KEYS[1] readers; ARGV[1] id. 1 if it was registered.
return redis.call('ZREM', KEYS[1], ARGV[1])
