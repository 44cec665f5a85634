"""The package's logic without I/O: errors, references, validity, arguments.
The behaviour against real servers is the conformance suite's
(tests/clients in the fencelock tree)."""
import hashlib
import threading
import unittest

import fencelock
from fencelock import _core
from fencelock.client import Leader, Lock, Reading, Status


class FakeClient:
    """Just enough of a Client for a Lock that makes no request."""

    class _K:
        def remove(self, lock):
            pass

    def __init__(self):
        self._keeper = self._K()
        self.calls = []

    def _call(self, method, path, body, what, timeout_s=None):
        self.calls.append((method, path))
        return {}


def grant(**kw):
    g = {"resource": "invoice:42", "kind": "plain", "lock_id": "20cd09bbe0869ae3e1657f553d0798e70c000001",
         "token": 1795733762367472, "validity_ms": 1000, "ttl_ms": 1000}
    g.update(kw)
    return g


class ErrorsTest(unittest.TestCase):
    def test_every_code_has_its_class(self):
        for code, cls in fencelock.errors.CODES.items():
            e = fencelock.from_answer(400, {"error": code, "message": "m"})
            self.assertIsInstance(e, cls, code)
            self.assertEqual(e.code, code)

    def test_unknown_codes_map_by_status(self):
        self.assertIsInstance(fencelock.from_answer(503, None), fencelock.Busy)
        self.assertIsInstance(fencelock.from_answer(500, "<html>"), fencelock.ServerError)
        self.assertIsInstance(fencelock.from_answer(401, None), fencelock.Unauthorized)
        self.assertIsInstance(fencelock.from_answer(418, {}), fencelock.BadRequest)

    def test_locked_reads_holder_fields_defensively(self):
        e = fencelock.from_answer(409, {"error": "locked", "message": "m", "holder_ref": "ab", "ttl_ms_left": 5})
        self.assertIsInstance(e, fencelock.Locked)
        self.assertEqual(e.holder_ref, "ab")
        self.assertIsNone(e.holder_client)
        self.assertEqual(e.ttl_ms_left, 5)

    def test_every_error_is_a_fencelock_error(self):
        for name in fencelock.__all__:
            obj = getattr(fencelock, name)
            if isinstance(obj, type) and issubclass(obj, Exception):
                self.assertTrue(issubclass(obj, fencelock.FencelockError), name)


class RefTest(unittest.TestCase):
    def test_ref_is_sha256_prefix(self):
        i = "20cd09bbe0869ae3e1657f553d0798e70c000001"
        self.assertEqual(fencelock.lock_ref(i), hashlib.sha256((i[:34] + "000000").encode()).hexdigest()[:16])

    def test_ref_refuses_a_bad_id(self):
        with self.assertRaises(ValueError):
            fencelock.lock_ref("XYZ")

    def test_status_held_by_ref_or_old_holder(self):
        lock = Lock(FakeClient(), grant(), _core.now_ms(), 1000, "plain", None)
        self.assertTrue(Status({"holder_ref": lock.ref}).held_by(lock))
        self.assertTrue(Status({"holder": lock.lock_id}).held_by(lock))
        self.assertFalse(Status({"holder_ref": "0" * 16, "holder": None}).held_by(lock))

    def test_reentrant_owner(self):
        lock = Lock(FakeClient(), grant(kind="reentrant"), _core.now_ms(), 1000, "reentrant", None)
        self.assertEqual(lock.owner_id, lock.lock_id[:34] + "000000")
        self.assertTrue(Status({"holder_ref": fencelock.lock_ref(lock.owner_id)}).held_by(lock))


def election_grant(**kw):
    g = {"name": "scheduler", "lock_id": "20cd09bbe0869ae3e1657f553d0798e70c000001", "ref": "x",
         "epoch": 1795733762367472, "token": 1795733762367472, "validity_ms": 1000, "ttl_ms": 1000,
         "value": "10.0.0.7:8080"}
    g.update(kw)
    return g


class ElectionTest(unittest.TestCase):
    def test_not_elected_is_a_locked(self):
        e = fencelock.from_answer(409, {"error": "not_elected", "message": "m"})
        self.assertIsInstance(e, fencelock.NotElected)
        self.assertIsInstance(e, fencelock.Locked)

    def test_a_leader_is_a_lock_of_its_election(self):
        c = FakeClient()
        leader = Leader(c, election_grant(), _core.now_ms(), 1000, None)
        self.assertEqual((leader.name, leader.kind, leader.token), ("scheduler", "leader", leader.epoch))
        self.assertEqual(leader.ref, fencelock.lock_ref(leader.lock_id))
        self.assertEqual(leader.value, "10.0.0.7:8080")
        leader.resign()
        leader.resign()
        self.assertEqual(c.calls, [("DELETE", "/v1/elections/scheduler/" + leader.lock_id)])
        with self.assertRaises(fencelock.Lost):
            leader.check()
        self.assertEqual(_core.extend_path("a/b", leader.lock_id, "leader"),
                         "/v1/elections/a%%2Fb/%s/extend" % leader.lock_id)

    def test_a_deposed_leader_is_lost_without_a_request(self):
        c = FakeClient()
        leader = Leader(c, election_grant(validity_ms=5), _core.now_ms() - 10, 1000, None)
        self.assertFalse(leader.valid())
        self.assertTrue(leader.lost_event.is_set())
        with self.assertRaises(fencelock.Lost):
            leader.fenced(lambda t: t)
        self.assertEqual(c.calls, [])

    def test_readings_are_read_defensively(self):
        r = Reading({"name": "s", "leader": False, "epoch": 9})
        self.assertEqual((r.leader, r.epoch, r.value, r.leader_client, r.leader_ref), (False, None, None, None, None))
        leader = Leader(FakeClient(), election_grant(), _core.now_ms(), 1000, None)
        r = Reading({"leader": True, "epoch": leader.epoch, "value": "v", "leader_ref": leader.ref})
        self.assertTrue(r.led_by(leader))
        self.assertFalse(Reading({"leader": True, "epoch": leader.epoch + 1, "leader_ref": leader.ref}).led_by(leader))

    def test_observer_queries(self):
        self.assertEqual(_core.leader_path("s"), "/v1/elections/s")
        self.assertEqual(_core.leader_path("s", 0, None, 500), "/v1/elections/s?after=0&wait_ms=500")
        self.assertEqual(_core.leader_path("s", 7, "10.0.0.7:8080", 500),
                         "/v1/elections/s?after=7&value=10.0.0.7:8080&wait_ms=500")
        self.assertEqual(_core.leader_path("s", 7, "a b&c"), "/v1/elections/s?after=7&value=a%20b%26c")
        self.assertEqual(_core.leader_path("s", 7, "é+%"), "/v1/elections/s?after=7&value=%C3%A9%2B%25")

    def test_bad_election_arguments(self):
        c = fencelock.Client("http://127.0.0.1:9")
        for case in (lambda: c.campaign("", "v"), lambda: c.campaign("s", 5), lambda: c.campaign("s", "x" * 257),
                     lambda: c.campaign("s", "a\0b"), lambda: c.campaign("s", "v", ttl_ms=0),
                     lambda: c.campaign("s", "v", wait_ms=-1), lambda: c.observe("s", after=5),
                     lambda: c.watch("s", wait_ms=0), lambda: c.proclaim("s", "xyz", "v"),
                     lambda: c.resign("s", "xyz")):
            with self.assertRaises((ValueError, TypeError)):
                case()
        c.close()


class ValidityTest(unittest.TestCase):
    def test_valid_until_send_time_plus_validity(self):
        v = _core.Validity(1000.0, 500)
        self.assertTrue(v.valid(1499.9))
        self.assertFalse(v.valid(1500.0))
        self.assertEqual(v.remaining_ms(1200.0), 300.0)

    def test_extension_counts_from_its_own_send_and_never_moves_back(self):
        v = _core.Validity(1000.0, 500)
        v.extended(1300.0, 480)
        self.assertEqual(v.valid_until_ms, 1780.0)
        v.extended(1200.0, 100)  # a late answer of an older extension
        self.assertEqual(v.valid_until_ms, 1780.0)

    def test_a_lock_past_its_validity_is_lost_without_a_request(self):
        c = FakeClient()
        lost = []
        lock = Lock(c, grant(validity_ms=5), _core.now_ms() - 10, 1000, "plain", lambda l, e: lost.append(e))
        self.assertFalse(lock.valid())
        with self.assertRaises(fencelock.Lost) as cm:
            lock.check()
        self.assertEqual(cm.exception.code, "expired")
        self.assertTrue(lock.lost_event.is_set())
        self.assertEqual(len(lost), 1)
        self.assertEqual(lock.remaining_ms(), 0.0)
        self.assertEqual(c.calls, [])

    def test_fenced_checks_first(self):
        lock = Lock(FakeClient(), grant(), _core.now_ms(), 1000, "plain", None)
        self.assertEqual(lock.fenced(lambda t: t + 1), lock.token + 1)
        lock = Lock(FakeClient(), grant(validity_ms=0), _core.now_ms(), 1000, "plain", None)
        with self.assertRaises(fencelock.Lost):
            lock.fenced(lambda t: t)

    def test_keepalive_schedule(self):
        self.assertAlmostEqual(_core.extend_interval_ms(900), 300.0)
        self.assertEqual(_core.retry_delay_ms(1000, 0), 100.0)
        self.assertLessEqual(_core.retry_delay_ms(1000, 10), 1000 / 3.0 + 1e-9)

    def test_retry_wait_is_coarse(self):
        self.assertEqual(_core.retry_wait_ms(4567.8), 4000)
        self.assertEqual(_core.retry_wait_ms(456.7), 400)
        self.assertEqual(_core.retry_wait_ms(-3), 0)


class ArgumentsTest(unittest.TestCase):
    def setUp(self):
        self.c = fencelock.Client("http://127.0.0.1:9")  # never reached: every call below is refused first

    def tearDown(self):
        self.c.close()

    def test_bad_arguments_are_refused_before_any_request(self):
        cases = [lambda: self.c.lock(""), lambda: self.c.lock(5), lambda: self.c.lock("x" * 513),
                 lambda: self.c.lock("r", ttl_ms=0), lambda: self.c.lock("r", wait_ms=-1),
                 lambda: self.c.lock("r", wait="later"), lambda: self.c.lock("r", ttl_ms=True),
                 lambda: self.c.lock_many([]), lambda: self.c.lock_many("ab"), lambda: self.c.lock_many(["a\nb"]),
                 lambda: self.c.semaphore("r", 0), lambda: self.c.semaphore("r", 1025),
                 lambda: self.c.release("r", "abc"), lambda: self.c.extend("r", "A" * 40),
                 lambda: self.c.status("r", kind="semaphore"), lambda: self.c.lock("r", cancel=object())]
        for i, case in enumerate(cases):
            with self.assertRaises((ValueError, TypeError), msg=str(i)):
                case()

    def test_bad_urls_and_tokens(self):
        for url in ("127.0.0.1:7600", "ftp://x", "http://h/path", 7600):
            with self.assertRaises((ValueError, TypeError)):
                fencelock.Client(url)
        with self.assertRaises(ValueError):
            fencelock.Client("http://h", token="two words")
        with self.assertRaises(ValueError):
            fencelock.Client("http://h", ca_file="/ca.pem")

    def test_storage_arguments(self):
        sg = fencelock.StorageGuard("http://127.0.0.1:9")
        for case in (lambda: sg.put("k", 1), lambda: sg.put("", 1, token=5), lambda: sg.put("k", 1, token=0),
                     lambda: sg.put("k", 1, token=2 ** 53), lambda: sg.get("k", raise_fence=False),
                     lambda: sg.batch([]), lambda: sg.batch([{"op": "rename"}], token=5),
                     lambda: sg.put("k", 1, token=5, if_version=-1), lambda: fencelock.check_op("k", -1)):
            with self.assertRaises((ValueError, TypeError)):
                case()
        sg.close()


class AsyncArgumentsTest(unittest.TestCase):
    def test_async_client_refuses_bad_arguments(self):
        import asyncio

        async def go():
            c = fencelock.AsyncClient("http://127.0.0.1:9")
            with self.assertRaises(ValueError):
                await c.lock("r", ttl_ms=0)
            with self.assertRaises(ValueError):
                c.lock("")
            await c.close()

        asyncio.run(go())


if __name__ == "__main__":
    unittest.main()
