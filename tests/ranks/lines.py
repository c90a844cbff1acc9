"""What the rank programs print: a line in one write. The ranks' outputs reach the test merged
into one stream as they come; ``print`` writes a line's end apart from its text, so another
rank's line may come between the two and join this one."""
import sys


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
