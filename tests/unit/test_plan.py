from collections import Counter

from virtbench.config import parse_campaign
from virtbench.runner.plan import LIFECYCLE, schedule

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
