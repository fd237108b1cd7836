"""What one run of gpt_small.py under tests/bench/torch_gpt_mem.py printed
(lib.sh's gpt_mem writes it to a file): the torch tests that compare
trainshim with torch's allocators read it here."""
from collections import namedtuple

GptRun = namedtuple("GptRun", "calls evals reserved allocated backend")


def read(path):
    """VMM calls per step (--vmm-calls), evaluation batches, torch's peak
    reserved and allocated bytes and its allocator backend, of a run that
    got to its end."""
    lines = open(path).read().splitlines()
    assert "done" in lines, f"{path}: the run did not finish"
    calls = [int(l.split()[3]) for l in lines if l.startswith("vmm step ")]
    evals = sum(1 for l in lines if l.startswith("eval loss "))
    peak = [l.split() for l in lines if l.startswith("peak_reserved ")][0]
    return GptRun(calls, evals, int(peak[1]), int(peak[3]), peak[5])
