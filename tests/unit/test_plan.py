from collections import Counter

from virtbench.config import parse_campaign
from virtbench.experiments.benchmarks.schedule import LIFECYCLE, schedule

CAMPAIGN = parse_campaign({"name": "p", "repetitions": 4, "warmups": 2,
                           "platforms": ["native", "docker", "podman", "runc"],
                           "benchmarks": ["fio", "sysbench-cpu", "sqlite"]})


def test_every_platform_once_per_round_and_warmups_first():
    units = schedule(CAMPAIGN, seed=1)
    assert len(units) == 6 * 4
    per_round = Counter(u.round for u in units)
    assert set(per_round.values()) == {4}
    assert all(u.warmup == (u.round < 2) for u in units)
    for u in units:
        assert sorted(u.benchmarks) == sorted(["fio", "sysbench-cpu", "sqlite"])
        assert u.keys()[-1] == (u.round, u.platform, LIFECYCLE)


def test_order_is_randomized_but_reproducible_from_the_seed():
    a, b = schedule(CAMPAIGN, seed=7), schedule(CAMPAIGN, seed=7)
    assert a == b
    orders = {tuple(u.platform for u in a if u.round == r) for r in range(6)}
    assert len(orders) > 1, "platform order should change between rounds"
    assert schedule(CAMPAIGN, seed=8) != a


def test_no_shuffle_keeps_declared_order():
    c = CAMPAIGN.model_copy(update={"shuffle": False})
    units = schedule(c, seed=3)
    assert [u.platform for u in units[:4]] == ["native", "docker", "podman", "runc"]


def test_benchmark_order_is_shared_by_the_platforms_of_a_round_and_changes_between_rounds():
    """The verdicts pair each platform with the baseline round by round: both sides of a pair
    run the benchmarks in the same order (a benchmark's position moves its value)."""
    units = schedule(CAMPAIGN.model_copy(update={"repetitions": 10}), seed=5)
    per_round = {r: {u.benchmarks for u in units if u.round == r} for r in range(12)}
    assert all(len(orders) == 1 for orders in per_round.values())
    assert len({next(iter(o)) for o in per_round.values()}) > 1


def test_extra_round_shares_one_benchmark_order():
    from virtbench.experiments.benchmarks.schedule import extra_round

    entry = {"round": 9, "platforms": ["native", "docker", "podman"],
             "benchmarks": {"docker": ["fio", "sqlite"], "native": ["fio", "sqlite", "sysbench-cpu"],
                            "podman": ["sqlite", "sysbench-cpu", "fio"]}}
    units = extra_round(CAMPAIGN, 3, entry)
    full = next(u.benchmarks for u in units if u.platform == "native")
    for u in units:
        assert u.benchmarks == tuple(b for b in full if b in entry["benchmarks"][u.platform])
