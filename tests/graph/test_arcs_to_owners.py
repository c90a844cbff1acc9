"""arcs_to_owners (groute.graph.rank_graph): arcs packed as uint64 keys, sorted by their
sender and merged by their owner, in one process through a stand-in for the job's ranks (the
jobs themselves: tests/ranks/loading_checks.py, tests/ranks/app_checks.py)."""
import numpy as np
import pytest

from groute.graph.rank_graph import KEY_SHIFT, arcs_to_owners


class OneRank:
    """The ranks of a job of one process: what it sends itself arrives."""
    rank, size = 0, 1

    def alltoall_counts(self, counts, what=""):
        return np.asarray(counts, np.int64).copy()

    def alltoallv_bytes(self, send, send_counts, recv, recv_counts, what=""):
        n = int(send_counts.sum())
        recv[:n] = send[:n]


def keys_of(rows, cols):
    keys = np.asarray(rows, np.uint64) << KEY_SHIFT
    keys |= np.asarray(cols, np.uint64)
    return keys


def test_rows_up_to_two_to_the_31_keep_every_arc():
    """The last rows of a graph of 2^31 vertices: their keys pass 2^63, which int64 keys
    wrapped, cutting the rows' arcs away."""
    n = 2**31
    rows = np.array([n - 1, 5, n - 1, n - 2], np.int64)
    cols = np.array([7, n - 1, 3, 0], np.int64)
    offsets = [n - 8, n]                   # the one rank owns the last 8 rows only
    indptr, got, _ = arcs_to_owners(keys_of(rows[[0, 2, 3]], cols[[0, 2, 3]]), offsets,
                                    OneRank())
    assert indptr.tolist() == [0, 0, 0, 0, 0, 0, 0, 1, 3]
    assert got.tolist() == [0, 3, 7] and got.dtype == np.int32
    with pytest.raises(ValueError, match="below 2\\^31"):
        arcs_to_owners(keys_of([0], [0]), [0, n + 1], OneRank())


def test_rows_come_sorted_and_repeated_arcs_keep_their_values_order():
    rng = np.random.default_rng(5)
    rows = rng.integers(0, 50, 2000)
    cols = rng.integers(0, 50, 2000)
    rows[:10], cols[:10] = 3, 9                 # one arc repeated, with ten values
    values = rng.random(2000)
    indptr, got, moved = arcs_to_owners(keys_of(rows, cols), [0, 50], OneRank(),
                                        values=values)
    order = np.lexsort((cols, rows))            # stable: repeats in the order they came
    np.testing.assert_array_equal(got, cols[order])
    np.testing.assert_array_equal(moved, values[order])
    np.testing.assert_array_equal(np.diff(indptr), np.bincount(rows, minlength=50))
