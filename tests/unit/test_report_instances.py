"""Several instances at once (instances: N) are summarized per round: instance 0 holds the
round's per-instance mean, and the statistics count rounds, never instances as repetitions (#17)."""
from datetime import timedelta

from virtbench.analysis import synthetic
from virtbench.report import builder
from virtbench.store.db import Store, now


def test_instances_are_not_counted_as_repetitions(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    plats = synthetic.default_platforms()[:2]
    synthetic.fill(store, "m", repetitions=3, warmups=0, platforms=plats, benchmarks=[])
    t = now()
    for rnd in range(3):
        for platform, centre in (("native", 100.0), ("docker", 90.0)):
            values = [centre + d for d in (-2.0, -1.0, 0.0, 1.0, 2.0)]  # five instances at once
            samples = [{"metric": "rate", "value": v, "unit": "op/s", "higher_is_better": True, "category": "cpu",
                        "instance": i} for i, v in enumerate(values, 1)]
            samples.append({"metric": "rate", "value": sum(values) / 5 + rnd * 0.1, "unit": "op/s",
                            "higher_is_better": True, "category": "cpu", "instance": 0})
            store.record(run_id="m", round=rnd, warmup=False, platform=platform, benchmark="multi", status="ok",
                         started_at=t, finished_at=t + timedelta(seconds=1), duration_s=1.0, samples=samples)
    rows = {r.platform: r for r in builder.build(store, "m").rows if r.benchmark == "multi"}
    assert rows["docker"].n == 3 and rows["native"].n == 3, "one value per round, not 5 instances x 3 rounds"
    assert rows["docker"].values == [90.0, 90.1, 90.2]
    assert rows["docker"].verdict == "slower"
