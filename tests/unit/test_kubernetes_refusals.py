"""A kubernetes platform that cannot run is refused in one line with its fix, exit 2, before any
image is built or pod made (issue #38): the cases that need no cluster. Those that need one
(RBAC, node, RuntimeClass, a limit above the node) run against the test node in
tests/integration/test_kubernetes.py."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from virtbench.cli import main

KUBECONFIG = """apiVersion: v1
kind: Config
current-context: {current}
contexts:
- name: admin@vb
  context: {{cluster: vb, user: admin}}
clusters:
- name: vb
  cluster: {{server: "https://127.0.0.1:1"}}
users:
- name: admin
  user: {{token: s3cret-t0ken-never-shown}}
"""


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """`virtbench run` of a campaign whose one platform is a pod with these options."""
    from virtbench.images import build

    monkeypatch.setenv("VIRTBENCH_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("VIRTBENCH_RUNTIME_DIR", str(tmp_path / "run"))

    def built(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the image was about to be built: the refusal came too late")

    monkeypatch.setattr(build, "build", built)

    def go(**options: Any) -> tuple[int, str]:
        camp = {"name": "k", "baseline": "pod", "platforms": [{"name": "pod", "type": "kubernetes", **options}],
                "benchmarks": [{"name": "openssl", "seconds": 1}]}
        f = tmp_path / "c.yaml"
        f.write_text(yaml.safe_dump(camp))
        monkeypatch.setattr(sys, "argv", ["virtbench", "run", str(f), "--db", f"sqlite:///{tmp_path / 'db'}"])
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        return code, capsys.readouterr().err

    return go


def kubeconfig(tmp_path: Path, text: str) -> str:
    f = tmp_path / "kubeconfig"
    f.write_text(text)
    return str(f)


@pytest.mark.parametrize("case, text, options, needle", [
    ("no-kubeconfig", None, {}, "no kubeconfig at"),
    ("not-a-kubeconfig", "- just\n- a list\n", {}, "is not a kubeconfig"),
    ("unknown-context", KUBECONFIG.format(current="admin@vb"), {"context": "prod"}, "has no context 'prod'"),
    ("no-current-context", KUBECONFIG.format(current='""'), {}, "has no current-context"),
    ("unreachable", KUBECONFIG.format(current="admin@vb"), {}, "does not answer"),
])
def test_a_cluster_that_cannot_be_used_is_refused_in_one_line(run, tmp_path: Path, case: str, text: str | None,
                                                              options: dict[str, Any], needle: str):
    path = kubeconfig(tmp_path, text) if text is not None else str(tmp_path / "absent")
    code, err = run(kubeconfig=path, **options)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert "Traceback" not in err and lines[0].startswith("error: ") and needle in err, err
    assert "s3cret-t0ken-never-shown" not in err
    assert len([ln for ln in lines if ln.startswith("error:")]) == 1
