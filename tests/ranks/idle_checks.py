"""Run as several MPI processes by tests/test_launch.py: each rank says its process id, then
idles (what ends it is the test's subject). ``idle_checks.py SECONDS``."""
import os
import sys
import time

from groute import distributed
from lines import say

with distributed.Context(backend="cpu", timeout=float(sys.argv[1]) + 30) as ctx:
    say(f"rank {ctx.rank} pid {os.getpid()}")
    time.sleep(float(sys.argv[1]))
