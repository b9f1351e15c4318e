"""Device memory that lives for one call: the kernels' scratch (partial sums, slot
words, ticket counters) and the contiguous copies a call makes of layouts without
uniform rows.

Outside CUDA-graph capture it comes from CuPy's pool on the call's stream and goes
back to the pool when the call returns.  The pool is stream-ordered, so whoever gets
that memory next on the stream runs after the call's kernels.

Under capture that would be a silent defect.  The captured kernels write the same
addresses on every replay, long after the pool has handed them to someone else.  So
on a capturing stream (torch.cuda.graph, cupy.cuda.Stream.begin_capture) the memory
is taken and given back by stream-ordered allocation, cudaMallocAsync and
cudaFreeAsync.  Capture records these as the graph's own allocation and free
nodes: every replay allocates the call's memory from memory that the graph owns for
its whole life, and nothing outside the graph ever sees those addresses.
"""

from __future__ import annotations

import threading

import numpy as np

import cupy
from cupy.cuda import runtime


def capturing(stream) -> bool:
    """Whether `stream` (a cupy.cuda.Stream) is being captured into a CUDA graph."""
    return bool(runtime.streamIsCapturing(stream.ptr))


class CallMemory:
    """Arrays for one call's launches on `stream`, given back when the `with` block ends.

        with CallMemory(stream) as memory:
            partials = memory.empty((items, 2), cupy.float32)
            kernel(..., partials, stream=stream)
    """

    def __init__(self, stream):
        self.stream = stream
        self.captured = capturing(stream)
        self._pooled: list[cupy.ndarray] = []  # outside capture: dropped at the end, back to CuPy's pool
        self._graph_owned: list[int] = []  # under capture: freed by a captured cudaFreeAsync

    def empty(self, shape, dtype) -> cupy.ndarray:
        """An uninitialised array on the call's device, valid until the `with` block ends
        (in stream order: the stream's later work may reuse it)."""
        if not self.captured:
            with self.stream:
                a = cupy.empty(shape, dtype)
            self._pooled.append(a)
            return a
        dtype = np.dtype(dtype)
        nbytes = max(1, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
        ptr = runtime.mallocAsync(nbytes, self.stream.ptr)
        self._graph_owned.append(ptr)
        memory = cupy.cuda.UnownedMemory(ptr, nbytes, self, runtime.getDevice())
        return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(memory, 0))

    def filled_words(self, count: int, byte: int) -> cupy.ndarray:
        """`count` uint64 words with every byte set to `byte`, set in stream order."""
        words = self.empty(count, np.uint64)
        runtime.memsetAsync(words.data.ptr, byte, words.nbytes, self.stream.ptr)
        return words

    def release(self) -> None:
        self._pooled.clear()
        while self._graph_owned:
            runtime.freeAsync(self._graph_owned.pop(), self.stream.ptr)

    def __enter__(self) -> CallMemory:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if kind is None:
            self.release()
            return
        try:  # a launch failed: give the memory back if the stream still takes work, keep the first error
            self.release()
        except cupy.cuda.runtime.CUDARuntimeError:
            self._graph_owned.clear()


# A word of 0 per (device, stream), kept for the process, for kernels whose blocks take
# tickets from it and leave it 0 again (cross_entropy_held's XENT_REDUCE: atomicInc
# wrapping at the number of takers), and beside it, from the next 128-byte line, room for
# one value per row of such a launch (its rows are at most a block's threads), which
# the launch writes before it reads.  Calls on one stream run one after another, so they
# share its word and room; calls on other streams have their own.  Under capture the
# graph gets its own memory instead, the word set to 0 by a captured memset: a replay
# may run beside the capturing stream's later calls.  (Not guarded: a stream destroyed while
# its last such launch runs, whose handle CUDA hands at once to a new stream that launches
# another; the two would share the word.)
TICKET_ROWS = 1024
_TICKET_WORDS = 32 + TICKET_ROWS  # 4-byte words: the ticket's line, then the rows'
_tickets: dict[tuple[int, int, int], cupy.ndarray] = {}
_tickets_lock = threading.Lock()


def ticket(memory: CallMemory) -> tuple[int, int]:
    """(the device address of a ticket word of 0, that of TICKET_ROWS float32 words of room)
    for one launch on memory's stream, valid while the call's `with CallMemory` block lasts
    (and after it outside capture)."""
    if memory.captured:
        base = memory.filled_words(_TICKET_WORDS // 2, 0).data.ptr
        return base, base + 128
    return stream_ticket(memory.stream)


def stream_ticket(stream) -> tuple[int, int]:
    """ticket's word and room for a launch on `stream` (a cupy.cuda.Stream) that is not being
    captured: the stream's own, kept for the process."""
    stream_ptr = stream.ptr
    # cudaStreamPerThread is a stream of each host thread under one handle: a word for each
    key = (runtime.getDevice(), stream_ptr, threading.get_ident() if stream_ptr == runtime.streamPerThread else 0)
    words = _tickets.get(key)
    if words is None:
        with _tickets_lock, stream:
            words = _tickets.setdefault(key, cupy.zeros(_TICKET_WORDS, np.uint32))
    base = words.data.ptr
    return base, base + 128
