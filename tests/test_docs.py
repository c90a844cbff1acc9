"""The user guide's examples must run as written: every Python block, on CPU devices."""
import re
from pathlib import Path

import pytest

from groute.errors import DeviceError

DOCS = Path(__file__).resolve().parents[1] / "docs"
GUIDE = (DOCS / "USER_GUIDE.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", GUIDE, re.S)
#: the complete example: the one that squares numbers on whichever device is free
EXAMPLE = next(b for b in BLOCKS if "first_available" in b)


def test_the_guide_has_examples():
    assert len(BLOCKS) >= 5 and "elements per device" in EXAMPLE


@pytest.mark.timeout(60)
@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_user_guide_block_runs(number, capsys):
    block = BLOCKS[number]
    exec(compile(block, f"USER_GUIDE.md block {number}", "exec"), {})
    if block is EXAMPLE:
        assert "elements per device" in capsys.readouterr().out


@pytest.mark.timeout(60)
def test_the_example_with_a_failing_worker_reports_that_worker():
    """One worker raising: the caller sees that device and that exception, not a stop."""
    failing = EXAMPLE.replace("        done = 0\n", "        done = 0\n        if j == 1:\n"
                              "            raise ZeroDivisionError('worker 1 gave up')\n")
    assert failing != EXAMPLE
    with pytest.raises(DeviceError, match="cpu:1: ZeroDivisionError: worker 1 gave up") as info:
        exec(compile(failing, "USER_GUIDE.md (failing worker)", "exec"), {})
    assert isinstance(info.value.__cause__, ZeroDivisionError)
