"""The user guide's example must run as written."""
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.timeout(60)
def test_user_guide_example_runs(capsys):
    text = (DOCS / "USER_GUIDE.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    example = [b for b in blocks if "assert" in b]
    assert example, "the user guide lost its runnable example"
    exec(compile(example[0], "USER_GUIDE.md", "exec"), {})
    assert "elements per device" in capsys.readouterr().out
