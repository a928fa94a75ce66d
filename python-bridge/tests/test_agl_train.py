"""``agl train`` fails loudly: when its runner pool dies (an agent module that cannot be imported) and when step after
step has nothing to train (every rollout failed), it exits non-zero and says why, with the agent's own error."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The tiny local trainer, no warm-up: what is tested is the run's end, not learning.
TINY = ["--warmup-steps", "0", "--hidden", "16", "--layers", "1", "--rollout-timeout", "60"]


def _train(agent: Path, tmp_path: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    node = shutil.which("node")
    assert node, "node is not on PATH"
    command = [node, str(REPO / "bin" / "agl.js"), "train", str(agent), "--database", str(tmp_path / "train.db")]
    command += ["--steps", "6", "--n", "2", "--tasks-per-step", "2", "--", *TINY]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_agl_train_exits_non_zero_with_the_import_error_when_the_runner_pool_dies(tmp_path):
    agent = tmp_path / "agent.ts"
    agent.write_text('import { missing } from "no-such-package-agl";\nexport default missing;\n')
    done = _train(agent, tmp_path)
    assert done.returncode != 0, done.stderr
    assert "the runner pool exited" in done.stderr, done.stderr
    assert "no-such-package-agl" in done.stderr, done.stderr


def test_agl_train_exits_non_zero_naming_the_rollouts_error_when_nothing_can_be_trained(tmp_path):
    agent = tmp_path / "agent.ts"
    agent.write_text(
        f'import {{ rollout }} from "{REPO / "src" / "index.js"}";\n'
        'export default rollout(async () => { throw new Error("the model endpoint said no (agl test)"); });\n'
    )
    done = _train(agent, tmp_path)
    assert done.returncode != 0, done.stderr
    assert "3 steps in a row had nothing to train" in done.stderr, done.stderr
    assert "the model endpoint said no (agl test)" in done.stderr, done.stderr
