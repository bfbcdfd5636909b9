"""README's python code blocks run as written (in order, in one namespace)."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 3
    namespace: dict = {}
    for i, block in enumerate(blocks):
        try:
            exec(compile(block, f"README.md python block {i}", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the message names the block
            raise AssertionError(f"README python block {i} failed: {exc!r}") from exc
    assert namespace["grid_metrics"].loss.shape == (3, 4, namespace["T"])
