"""The results cache: one computation per key for any number of askers, a budget in bytes, errors not kept."""

import threading
import time

import numpy as np
import pytest

from lifecycle.errors import LifecycleError
from lifecycle.result_cache import DEFAULT_BUDGET_MB, ResultCache, approximate_bytes, budget_bytes

MB = 2**20


def _array(megabytes: float) -> np.ndarray:
    return np.zeros(int(megabytes * MB), dtype=np.uint8)


def test_thirty_askers_of_one_missing_key_share_one_computation():
    cache = ResultCache(budget=100 * MB)
    calls, release = [], threading.Event()

    def compute(_report):
        calls.append(threading.current_thread().name)
        release.wait(5)
        return object()

    results = [None] * 30
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, cache.get(("inspect", 1), compute)))
               for i in range(30)]
    for thread in threads:
        thread.start()
    time.sleep(0.2)  # everyone is waiting on the first asker's computation
    release.set()
    for thread in threads:
        thread.join(5)
    assert len(calls) == 1
    assert all(result is results[0] for result in results) and results[0] is not None
    assert cache.computations["inspect"] == 1 and cache.hits["inspect"] == 29


def test_the_budget_is_in_bytes_and_the_least_recently_used_result_goes_first():
    cache = ResultCache(budget=int(3.5 * MB))
    for name in "abc":
        cache.get(("x", name), lambda _r: _array(1))
    cache.get(("x", "a"), lambda _r: pytest.fail("a is kept: 3 MB fit 3.5 MB"))  # a becomes the most recent
    cache.get(("x", "d"), lambda _r: _array(1))  # 4 MB > 3.5 MB: b, the least recently used, goes
    assert cache.peek(("x", "b")) is None
    assert all(cache.peek(("x", n)) is not None for n in "acd")
    assert 3 * MB <= cache.used_bytes <= 3.5 * MB and cache.evictions == 1
    cache.get(("x", "big"), lambda _r: _array(2))  # one large result pushes out two small ones
    assert len(cache) == 2 and cache.evictions == 3


def test_many_small_results_fit_where_few_large_ones_do():
    cache = ResultCache(budget=10 * MB)
    for n in range(200):
        cache.get(("small", n), lambda _r: _array(0.01))
    assert len(cache) == 200  # no cap on the number of entries
    for n in range(5):
        cache.get(("large", n), lambda _r: _array(4))
    assert cache.used_bytes <= 10 * MB and cache.peek(("large", 4)) is not None


def test_a_result_still_being_computed_is_never_evicted():
    cache = ResultCache(budget=1 * MB)
    release = threading.Event()
    running = cache.start(("answer", 1), lambda report: (report("first token"), release.wait(5), "done")[2])
    for n in range(5):
        cache.get(("x", n), lambda _r: _array(0.9))
    assert cache.peek(("answer", 1)) is running and not running.done()
    assert running.progress == ["first token"]  # progress is visible before the end
    release.set()
    assert running.result(5) == "done"


def test_a_failure_reaches_every_waiter_and_is_not_kept():
    cache = ResultCache(budget=MB)
    release = threading.Event()

    def failing(_report):
        release.wait(5)
        raise LifecycleError("the model refused", param="prompt")

    first = cache.start(("inspect", "p"), failing)
    second = cache.start(("inspect", "p"), lambda _r: pytest.fail("joined the running computation"))
    assert second is first
    release.set()
    with pytest.raises(LifecycleError, match="the model refused"):
        second.result(5)
    assert cache.get(("inspect", "p"), lambda _r: "second try") == "second try"
    assert cache.computations["inspect"] == 2


def test_approximate_bytes_counts_arrays_inside_nested_results():
    inner = _array(1)
    value = {"forward": [inner, inner], "steps": ("a" * 1000,)}  # the same array counted once
    assert MB <= approximate_bytes(value) < MB + 10_000


@pytest.mark.parametrize("raw", ["-1", "lots", "nan"])
def test_a_bad_budget_setting_is_a_clear_error(raw):
    with pytest.raises(LifecycleError, match="LIFECYCLE_CACHE_MB"):
        budget_bytes({"LIFECYCLE_CACHE_MB": raw})


def test_the_budget_setting_is_read_in_megabytes():
    assert budget_bytes({"LIFECYCLE_CACHE_MB": "64"}) == 64 * MB
    assert budget_bytes({}) == DEFAULT_BUDGET_MB * MB
