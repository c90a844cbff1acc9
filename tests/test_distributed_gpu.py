"""One process per GPU (groute.distributed with backend="cuda"), as real processes under
mpiexec: every app's answers equal one process's on one GPU, the RankRouter's rows arrive in
order, and a rank that fails, in a step or in the middle of a flush, stops every rank naming
it. ``gpu``: two ranks sharing GPU 0 (``CUDA_VISIBLE_DEVICES=0``), so the MPI transport
(staged through the host) whatever the machine; ``multigpu``: one rank per GPU on 2 and 4
GPUs, over NCCL (``GROUTE_RANK_TRANSPORT=nccl``, which refuses to run otherwise)."""
import re
import time

import pytest

from mpi_support import needs_mpi, program, run_ranks
from support import need_gpus

pytestmark = needs_mpi
APPS = ("bfs", "sssp", "pagerank", "pagerank-kernel", "pagerank-dangling", "pagerank-bins",
        "pagerank-csc", "pagerank-nstart", "pagerank-nstart-bins", "cc", "kcore", "bfs-parents",
        "sssp-parents", "pagerank-weighted-csc", "pagerank-weighted-bins", "bfs-host",
        "sssp-host", "pagerank-host", "cc-host")
GRAPHS = ["kron:8", "grid:9"]
#: two ranks on GPU 0, whatever else the machine has: the MPI transport
SHARED = {"CUDA_VISIBLE_DEVICES": "0", "GROUTE_RANK_TRANSPORT": "auto"}
NCCL = {"GROUTE_RANK_TRANSPORT": "nccl"}


def check_apps(n, env):
    done = run_ranks(n, [program("app_checks.py"), "--backend", "cuda", *GRAPHS], timeout=420,
                     env=env)
    assert done.returncode == 0, done.stderr
    assert "DIFFERENT" not in done.stdout, done.stdout
    for spec in GRAPHS:
        for app in APPS:
            seen = len(re.findall(rf"rank \d {app} {re.escape(spec)}: same", done.stdout))
            assert seen == n, (app, spec, done.stdout)
    return set(re.findall(r"rank \d transport (\w+)", done.stdout))


def check_collectives(n, env):
    done = run_ranks(n, [program("runtime_checks.py"), "cuda", "collectives", 60], timeout=180,
                     env=env)
    assert done.returncode == 0, done.stderr
    assert len(re.findall(r"rank \d: collectives ok over (?:mpi|nccl)", done.stdout)) == n
    return set(re.findall(r"collectives ok over (\w+)", done.stdout))


def check_failure(n, how, env):
    done = run_ranks(n, [program("runtime_checks.py"), "cuda", how, 1, 60], timeout=180, env=env)
    assert done.returncode != 0
    error = ("injected failure in the transport" if how == "fail-in-flush"
             else "injected failure")
    found = re.search(rf"rank 0 raised after ([\d.]+) s: RankFailed: cuda:1 \(rank 1\): "
                      rf"ZeroDivisionError: {error}", done.stdout)
    assert found, done.stdout + done.stderr
    assert float(found[1]) < 10 and "did not raise" not in done.stdout


@pytest.mark.gpu
@pytest.mark.timeout(450)
def test_two_ranks_sharing_a_gpu_answer_as_one_process():
    need_gpus(1, physical=True)
    assert check_apps(2, SHARED) == {"mpi"}


@pytest.mark.gpu
@pytest.mark.timeout(450)
def test_a_job_of_one_rank_answers_as_one_process():
    """``mpiexec -n 1``: the rank's graph is one part holding every row."""
    need_gpus(1, physical=True)
    assert check_apps(1, SHARED) == {"mpi"}


@pytest.mark.gpu
@pytest.mark.timeout(200)
def test_two_ranks_sharing_a_gpu_route_rows_in_order():
    need_gpus(1, physical=True)
    assert check_collectives(2, SHARED) == {"mpi"}


@pytest.mark.gpu
@pytest.mark.timeout(200)
@pytest.mark.parametrize("how", ["fail", "fail-in-flush"])
def test_a_failing_rank_on_a_shared_gpu_stops_the_job_naming_it(how):
    need_gpus(1, physical=True)
    check_failure(2, how, SHARED)


@pytest.mark.gpu
@pytest.mark.timeout(200)
def test_nccl_is_refused_for_ranks_sharing_a_gpu():
    need_gpus(1, physical=True)
    done = run_ranks(2, [program("runtime_checks.py"), "cuda", "collectives", 60], timeout=180,
                     env={**SHARED, **NCCL})
    assert done.returncode != 0
    assert "GROUTE_RANK_TRANSPORT=nccl cannot run here: ranks 0 and 1 share GPU" in done.stderr


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("app", ["bfs", "pr", "sssp --exchange peer", "pr --persistent on"])
def test_the_commands_run_on_gpu_ranks(app):
    need_gpus(1, physical=True)
    done = run_ranks(2, ["-m", "groute", *app.split(), "--graph", "grid:8", "--verify",
                         "--repeat", "1", "--backend", "cuda"], timeout=240, env=SHARED)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("verify:") == 1 and "FAILED" not in done.stdout, done.stdout
    assert "2 cuda devices (logical, sharing 1 GPU" in done.stdout, done.stdout


@pytest.mark.multigpu
@pytest.mark.timeout(450)
@pytest.mark.parametrize("n", [2, 4])
def test_one_rank_per_gpu_over_nccl_answers_as_one_process(n):
    need_gpus(n, physical=True)
    assert check_apps(n, NCCL) == {"nccl"}


@pytest.mark.multigpu
@pytest.mark.timeout(200)
@pytest.mark.parametrize("n", [2, 4])
def test_one_rank_per_gpu_over_nccl_routes_rows_in_order(n):
    need_gpus(n, physical=True)
    assert check_collectives(n, NCCL) == {"nccl"}


@pytest.mark.multigpu
@pytest.mark.timeout(200)
@pytest.mark.parametrize("how", ["fail", "fail-in-flush"])
def test_a_failing_rank_over_nccl_stops_the_job_naming_it(how):
    """fail-in-flush: the others wait for its rows in an NCCL group, give up at its notice
    and abort their communicators."""
    need_gpus(2, physical=True)
    check_failure(2, how, NCCL)


#: the peer kernel across processes: rank 1's launch fails, rank 0's kernel gives up waiting
PEER_FAIL = {"GROUTE_PEER_BARRIER_TIMEOUT": "2"}


def check_peer(n, env):
    """BFS and SSSP with exchange='peer', and PageRank with persistent=True, on ``n`` ranks
    (each kernel writing into the others' memory through CUDA IPC) equal one process's, two
    runs of one solver each."""
    done = run_ranks(n, [program("peer_checks.py"), "same", "kron:8", "grid:9"], timeout=300,
                     env=env)
    assert done.returncode == 0, done.stderr
    for spec in ("kron:8", "grid:9"):
        for app in ("bfs", "sssp", "sssp-window-4", "sssp-window-None", "pagerank"):
            seen = re.findall(rf"rank \d {app} {re.escape(spec)}: same exchange peer", done.stdout)
            assert len(seen) == n, (app, spec, done.stdout, done.stderr)
    # BFS pulled over in-arcs on kron:8, reading the frontier copies the ranks store into
    # each other's memory
    assert len(re.findall(r"bfs kron:8: same exchange peer pull levels [1-9]", done.stdout)) == n


def check_peer_failure(n, env, app):
    """Rank 1's launch of ``app``'s kernel (BFS's peer kernel, PageRank's persistent one)
    raises: it raises that error, and every other rank raises within the meeting timeout and
    a poll, naming cuda:1, rank 1 and the original error; none hangs, at the run or at the
    solver's close."""
    start = time.perf_counter()
    done = run_ranks(n, [program("peer_checks.py"), "fail", 1, "kron:8", app], timeout=120,
                     env={**env, **PEER_FAIL})
    assert "did not raise" not in done.stdout, done.stdout
    assert done.returncode == 0 and time.perf_counter() - start < 60, done.stdout + done.stderr
    # BFS's launch is submitted to the device's stream, which names the device
    error = (r"DeviceError: cuda:1: " if app == "bfs" else "") + \
        r"ZeroDivisionError: injected failure in the launch"
    subject = "peer bfs" if app == "bfs" else r"persistent \w+"
    assert re.search(rf"rank 1 raised after [\d.]+ s: {error}", done.stdout), \
        done.stdout + done.stderr
    for r in [r for r in range(n) if r != 1]:
        found = re.search(rf"rank {r} raised after ([\d.]+) s: RuntimeError: {subject}: cuda:1 "
                          rf"\(rank 1\) could not launch its kernel: {error}", done.stdout)
        assert found and float(found[1]) < 10, done.stdout + done.stderr


@pytest.mark.gpu
@pytest.mark.timeout(330)
def test_two_ranks_sharing_a_gpu_run_the_peer_kernel_over_cuda_ipc():
    """The kernels of two processes on one GPU take turns (time-sliced contexts): slow
    meetings, the same answers."""
    need_gpus(1, physical=True)
    check_peer(2, SHARED)


def check_cc_in_place(n, env):
    """CC on ``n`` CUDA ranks reads every rank's changes and rows in place over CUDA IPC
    (``auto``; one merge, nothing routed) and answers as one process, with the changes' pairs
    listed (a list of n pairs) or overflowing (a list of one pair: er:400:1's many small
    components make every sender read whole), twice on one solver."""
    graphs = ["er:400:1", "kron:8", "grid:9"]
    for share, whole in ((1, 0), (10**9, n - 1)):
        done = run_ranks(n, [program("cc_checks.py"), "cuda", str(share), *graphs],
                         timeout=240, env=env)
        assert done.returncode == 0, done.stderr
        rows = re.findall(r"rank (\d) (\S+): (\w+) whole (\d+) bytes (\d+) rounds (\d+) "
                          r"routed False", done.stdout)
        assert len(rows) == n * len(graphs), done.stdout + done.stderr
        assert all(same == "same" and rounds == "1" and int(b) > 0
                   for _, _, same, _, b, rounds in rows), done.stdout
        assert [int(w) for _, spec, _, w, _, _ in rows if spec == "er:400:1"] == [whole] * n
        assert done.stdout.count("made before: same") == n * len(graphs), done.stdout


@pytest.mark.gpu
@pytest.mark.timeout(300)
def test_two_ranks_sharing_a_gpu_merge_cc_changes_in_place():
    need_gpus(1, physical=True)
    check_cc_in_place(2, SHARED)


@pytest.mark.multigpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("n", [2, 4])
def test_one_rank_per_gpu_merges_cc_changes_in_place(n):
    need_gpus(n, physical=True)
    check_cc_in_place(n, NCCL)


@pytest.mark.gpu
@pytest.mark.timeout(150)
@pytest.mark.parametrize("app", ["bfs", "pagerank"])
def test_a_failed_launch_on_one_rank_of_the_kernels_across_them_stops_every_rank(app):
    need_gpus(1, physical=True)
    check_peer_failure(2, SHARED, app)


@pytest.mark.multigpu
@pytest.mark.timeout(330)
@pytest.mark.parametrize("n", [2, 4])
def test_one_rank_per_gpu_runs_the_peer_kernel_over_cuda_ipc(n):
    need_gpus(n, physical=True)
    check_peer(n, NCCL)


@pytest.mark.multigpu
@pytest.mark.timeout(150)
@pytest.mark.parametrize("app", ["bfs", "pagerank"])
def test_a_failed_launch_on_one_rank_per_gpu_stops_every_rank(app):
    need_gpus(2, physical=True)
    check_peer_failure(2, NCCL, app)
