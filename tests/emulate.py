"""NumPy (float32) emulations of each kernel's blocking and merges.

They follow the CUDA code step by step for one row: the head/body/tail split
of common.cuh's RowSpan, the thread-strided ownership of vectors, the online
(max, sum) updates and merges with their -inf guards, the chunks of
multi_block and the cluster slices of single_read.  Reductions whose order
does not matter for the checks (plain max, float sums) use NumPy's.

three_pass, two_pass and multi_block also emulate elements.cuh: rows of
float16 or bfloat16 (`vec` = 8 elements per 16-byte vector, a row start
aligned to 2 bytes) and the op log_softmax; `run()` widens the stored
elements to float32 exactly, runs the float32 algorithm and rounds the
result once to the dtype (round to nearest even), as the kernels do.
"""

from __future__ import annotations

import functools

import numpy as np

F32 = np.float32
NEG_INF = F32(-np.inf)
LOG2E = F32(1.4426950408889634)


def exp_approx(d):
    return np.exp2(np.asarray(d, dtype=F32) * LOG2E).astype(F32)


def exp_elem(x, base, shift=0.0):
    """elements.cuh exp_elem for halves (and float32 built with FLOAT_EXP_FTZ): ex2.approx.ftz
    of fma(x - base, log2 e, shift), the fma rounded once, results below 2^-126 flushed to 0."""
    with np.errstate(invalid="ignore", over="ignore"):
        d = (np.asarray(x, dtype=F32) - base).astype(F32)
        y = np.exp2((d.astype(np.float64) * np.float64(LOG2E) + shift).astype(F32)).astype(F32)
    return np.where(y < F32(2.0**-126), F32(0), y).astype(F32)


def exp_elem_of_difference(shift=0.0):
    """exp_elem as the emulations' `exp` arguments take it: a function of d = x - base."""
    return lambda d: exp_elem(d, F32(0), shift)


# elements.cuh EXP_SHIFT of softmax by exp_elem: bfloat16's, and float32's where built with FLOAT_EXP_FTZ
# (cluster_row); float16's and log_softmax's 0
EXP_SHIFT = {"bfloat16": 8.0, "float32": 24.0}


def exp_base(m):
    return np.where(m == NEG_INF, F32(0), m).astype(F32)


def merge(a, b):
    """common.cuh merge() on arrays of pairs ((max, sum) as two arrays)."""
    m = np.fmax(a[0], b[0]).astype(F32)
    base = exp_base(m)
    with np.errstate(invalid="ignore", over="ignore"):
        return m, (a[1] * exp_approx(a[0] - base) + b[1] * exp_approx(b[0] - base)).astype(F32)


def merge_all(pairs):
    """Merges a list of (max, sum) pairs left to right."""
    acc = (NEG_INF, F32(0))
    for p in pairs:
        acc = merge(acc, p)
    return acc


def row_span(n: int, misalign: int, vec: int = 4):
    """(head, vecs) for a row of n elements whose start is `misalign` elements
    past a 16-byte boundary, `vec` elements to a 16-byte vector."""
    head = min((vec - misalign % vec) % vec, n)
    return head, (n - head) // vec


def split(row, misalign, vec: int = 4):
    head, vecs = row_span(len(row), misalign, vec)
    body = row[head : head + vec * vecs].reshape(vecs, vec)
    scalars = np.concatenate([row[:head], row[head + vec * vecs :]])
    return body, scalars


def thread_vectors(body, threads: int):
    """Vectors arranged (iteration, thread, vec), padded with -inf: thread t owns
    vectors t, t + threads, ..."""
    iters = max(1, -(-len(body) // threads))
    padded = np.full((iters * threads, body.shape[1]), NEG_INF, dtype=F32)
    padded[: len(body)] = body
    return padded.reshape(iters, threads, body.shape[1])


def add_scalars(m, s, scalars, threads: int):
    """online_add1 of scalar k into thread k % threads's (max, sum), in place."""
    with np.errstate(invalid="ignore", over="ignore"):
        for k, value in enumerate(scalars):
            t = k % threads
            if value > m[t]:
                s[t] *= exp_approx(m[t] - value)
                m[t] = value
            s[t] += exp_approx(value - exp_base(m[t]))
    return m, s


def online_threads(body, scalars, threads: int, compensated: bool = False):
    """online_span(): each thread's running (max, sum) after online_add4 over
    its vectors (compensated, as log_softmax's online_add_vec_compensated:
    what each addition rounds away is carried and taken back at the end), then
    online_add1 over its scalars."""
    m = np.full(threads, NEG_INF, dtype=F32)
    s = np.zeros(threads, dtype=F32)
    lost = np.zeros(threads, dtype=F32)
    with np.errstate(invalid="ignore", over="ignore"):
        for v in thread_vectors(body, threads):
            m4 = v.max(axis=1) if not np.isnan(v).any() else np.fmax.reduce(v, axis=1)
            new = m4 > m
            scale = exp_approx(m - m4)
            s = np.where(new, s * scale, s).astype(F32)
            lost = np.where(new, lost * scale, lost).astype(F32)
            m = np.where(new, m4, m).astype(F32)
            base = exp_base(m)
            terms = exp_approx(v - base[:, None]).sum(axis=1, dtype=F32)
            if compensated:
                y = (terms - lost).astype(F32)
                t = (s + y).astype(F32)
                lost = ((t - s).astype(F32) - y).astype(F32)
                s = t
            else:
                s = (s + terms).astype(F32)
        if compensated:
            s = (s - lost).astype(F32)
    return add_scalars(m, s, scalars, threads)


def max_then_sum_threads(body, scalars, threads: int, exp=exp_approx, scalar_term=None):
    """multi_block_l2's read item: each thread's max over its vectors (held in
    registers), one sum of e^(x - max) by `exp`, then online_add1 over its
    scalars (or, given `scalar_term`, elem_add1: merge with (x, scalar_term))."""
    v = thread_vectors(body, threads)  # (iteration, thread, vec), -inf padded
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.fmax.reduce(v.reshape(-1, threads, v.shape[2]).transpose(1, 0, 2).reshape(threads, -1), axis=1)
        m = m.astype(F32)
        base = exp_base(m)
        s = np.zeros(threads, dtype=F32)
        for it in v:
            s = (s + exp(it - base[:, None]).sum(axis=1, dtype=F32)).astype(F32)
    return add_scalar_terms(m, s, scalars, threads, scalar_term)


def add_scalar_terms(m, s, scalars, threads: int, scalar_term=None):
    """Scalar k into thread k % threads's (max, sum), in place: online_add1, or given
    `scalar_term`, elem_add1 (merge with (x, scalar_term))."""
    if scalar_term is None:
        return add_scalars(m, s, scalars, threads)
    with np.errstate(invalid="ignore", over="ignore"):
        for k, value in enumerate(scalars):
            t = k % threads
            m[t], s[t] = merge((m[t], s[t]), (F32(value), F32(scalar_term)))
    return m, s


def warp_merge(m, s):
    """common.cuh warp_merge() on (warps, 32) arrays: the xor butterfly, every lane merging
    its pair with its partner's (lane 0's result returned per warp)."""
    lanes = np.arange(32)
    for o in (16, 8, 4, 2, 1):
        m, s = merge((m, s), (m[:, lanes ^ o], s[:, lanes ^ o]))
    return m[:, 0], s[:, 0]


def block_merge(m, s):
    """common.cuh block_merge(): each warp's butterfly, then one over the warps' results
    (padded to 32 lanes with the identity); threads a multiple of 32, or fewer."""
    m, s = np.asarray(m, dtype=F32), np.asarray(s, dtype=F32)
    warps = -(-len(m) // 32)
    pad = warps * 32 - len(m)
    m = np.concatenate([m, np.full(pad, NEG_INF, dtype=F32)]).reshape(warps, 32)
    s = np.concatenate([s, np.zeros(pad, dtype=F32)]).reshape(warps, 32)
    wm, ws = warp_merge(m, s)
    m = np.concatenate([wm, np.full(32 - warps, NEG_INF, dtype=F32)]).reshape(1, 32)
    s = np.concatenate([ws, np.zeros(32 - warps, dtype=F32)]).reshape(1, 32)
    bm, bs = warp_merge(m, s)
    return bm[0], bs[0]


def write(row, m, s, op="softmax"):
    """elements.cuh RowOutput: e^(x - m) * (1 / s), or (x - m) - log(s), in float32."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if op == "log_softmax":
            return ((row - F32(m)).astype(F32) - np.log(F32(s))).astype(F32)
        return (exp_approx(row - m) * (F32(1) / s)).astype(F32)


def three_pass(row, misalign=0, threads=64, vec=4, op="softmax"):
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        m = np.fmax.reduce(row) if len(row) else NEG_INF  # fmaxf: NaN never wins
        s = exp_approx(row - exp_base(m)).sum(dtype=F32)
    return write(row, m, s, op)


def two_pass(row, misalign=0, threads=64, vec=4, op="softmax"):
    body, scalars = split(row, misalign, vec)
    m, s = block_merge(*online_threads(body, scalars, threads, op == "log_softmax"))
    return write(row, m, s, op)


def multi_block_totals(row, misalign=0, threads=64, chunk_vecs=8, vec=4, op="softmax"):
    """multi_block_partials then the combine's merge: the row's (m, s)."""
    body, scalars = split(row, misalign, vec)
    chunks = max(1, -(-len(body) // chunk_vecs))
    partials = []
    for c in range(chunks):
        part = body[c * chunk_vecs : (c + 1) * chunk_vecs]
        partials.append(block_merge(*online_threads(part, scalars if c == 0 else scalars[:0], threads,
                                                    op == "log_softmax")))
    return merge_all(partials)


def multi_block(row, misalign=0, threads=64, chunk_vecs=8, vec=4, op="softmax"):
    return write(row, *multi_block_totals(row, misalign, threads, chunk_vecs, vec, op), op)


def multi_block_row_stats(row, misalign=0, threads=64, chunk_vecs=8, vec=4):
    """multi_block_row_stats: (lse, max) from the row's (m, s), NaN and +inf told apart
    by a second look at a row whose max is +inf."""
    m, s = multi_block_totals(row, misalign, threads, chunk_vecs, vec)
    if m == F32(np.inf):
        return (F32(np.nan),) * 2 if np.isnan(row).any() else (F32(np.inf),) * 2
    if np.isnan(s):
        return F32(np.nan), F32(np.nan)
    with np.errstate(divide="ignore"):
        return F32(m + np.log(s)), F32(m)


def cross_entropy_row(row, target, misalign=0, threads=64, chunk_vecs=8, vec=4, ignore_index=-100,
                      smoothing=0.0, z_loss=0.0, scale=1.0):
    """cross_entropy.cu for one row: the row's (m, s) as multi_block's partials and merge
    give them, its sum of x, then cross_entropy_rows' loss and coefficients and
    cross_entropy_grad's output.  Returns (loss, lse, gradient), float32."""
    m, s = multi_block_totals(row, misalign, threads, chunk_vecs, vec)
    total = F32(np.sum(row, dtype=F32))
    n = len(row)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lse = F32(m + np.log(s))
        if target == ignore_index:
            return F32(0), lse, np.zeros(n, F32)
        if not 0 <= target < n:
            return F32(np.nan), lse, np.full(n, np.nan, F32)
        xt, k, e = row[target], F32(scale), F32(smoothing)
        loss = F32((F32(1) - e) * (lse - xt) + F32(z_loss) * lse * lse)
        if e:
            loss = F32(loss + e * (lse - total / F32(n)))
        a = F32(k * (F32(1) + F32(2) * F32(z_loss) * lse) / s)
        b = F32(k * e / F32(n))
        grad = (a * exp_approx(row - m) - b).astype(F32)
        grad[target] = F32(a * exp_approx(xt - m) - b - k * (F32(1) - e))
    return loss, lse, grad


def multi_block_l2(row, misalign=0, threads=32, vpt=2, vec=4, op="softmax", exp_shift=0.0, runs=1):
    """multi_block_l2.cu: chunks of threads x vpt vectors (the scalars in chunk 0),
    each thread's max then sum, each block's (max, sum) published; thread t
    merges slots t, t + threads, ... in order (row_total), then the block
    merges the threads' pairs.  Halves (MBL2_EXP_ELEM) sum exp_elem terms,
    2^shift e^(x - m) (`exp_shift` for softmax, 0 for log_softmax), add the
    scalars by elem_add1, and write softmax as exp_elem(x, M) / S.  With
    `runs`, each thread's vectors of a chunk are reduced as that many runs of
    vpt // runs vectors, merged, then the scalars added (multi_block_smem.cu's
    split_max_sum)."""
    body, scalars = split(row, misalign, vec)
    chunk_vecs = threads * vpt
    chunks = max(1, -(-len(body) // chunk_vecs))
    shift = exp_shift if op == "softmax" else 0.0
    knobs = dict(exp=exp_elem_of_difference(shift), scalar_term=2.0**shift) if vec == 8 else {}
    run_vecs = threads * (vpt // runs)

    def chunk_pairs(part, sc):
        if runs == 1:
            return max_then_sum_threads(part, sc, threads, **knobs)
        m, s = functools.reduce(merge, [max_then_sum_threads(part[r * run_vecs : (r + 1) * run_vecs], sc[:0], threads,
                                                             **knobs) for r in range(runs)])
        return add_scalar_terms(m.copy(), s.copy(), sc, threads, knobs.get("scalar_term"))

    slots = [block_merge(*chunk_pairs(body[c * chunk_vecs : (c + 1) * chunk_vecs], scalars if c == 0 else scalars[:0]))
             for c in range(chunks)]
    m, s = merge_all([merge_all(slots[t::threads]) for t in range(threads)])
    if vec == 8 and op == "softmax":
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            return (exp_elem(row, m, shift) * (F32(1) / s)).astype(F32)
    return write(row, m, s, op)


def multi_block_smem(row, misalign=0, threads=32, vpt=2, vec=4, op="softmax", exp_shift=0.0, split=False):
    """multi_block_smem.cu: multi_block_l2's chunks, reductions, row merge and
    writes, over a group of `threads` threads each holding vpt vectors of a
    chunk (split: the reducers, 2 x vpt each, which for halves sum two runs of
    vpt apart, split_max_sum)."""
    runs = 2 if split and vec == 8 else 1
    return multi_block_l2(row, misalign, threads, 2 * vpt if split else vpt, vec, op, exp_shift, runs)


def multi_block_l2_lag(lag, chunks):
    """multi_block_l2.cu: the lag it runs with, at least chunks - 1 (a row's last
    read item precedes its first write item)."""
    return max(lag, chunks - 1)


def multi_block_l2_item(ticket, items, lag):
    """multi_block_l2.cu: the work item of a ticket, ("read" | "write", item) or
    None (a ticket before the first write item or after the last read item)."""
    again = ticket & 1
    item = (ticket >> 1) - (lag if again else 0)
    return ("write" if again else "read", item) if 0 <= item < items else None


def multi_block_l2_schedule(rows, chunks, lag, grid, rng):
    """Runs the kernel's ticket loop with `grid` blocks advancing in a random
    order: each block holds its current ticket and the next one it took (the
    prefetch), a write item completes only once every read item of its row has.
    Returns (completed items in order, the tickets handed out); raises
    RuntimeError if no block can advance (a deadlock)."""
    lag = multi_block_l2_lag(lag, chunks)
    items, last = rows * chunks, 2 * (rows * chunks + lag)
    counter = 0

    def take():
        nonlocal counter
        counter += 1
        return counter - 1

    blocks = [[take(), None] for _ in range(grid)]  # [current, next]
    read_done, done = set(), []
    while any(b[0] < last for b in blocks):
        ready = []
        for b in blocks:
            if b[0] >= last:
                continue
            work = multi_block_l2_item(b[0], items, lag)
            if work and work[0] == "write":
                row = work[1] // chunks
                if not all(row * chunks + c in read_done for c in range(chunks)):
                    continue
            ready.append(b)
        if not ready:
            raise RuntimeError(f"deadlock: blocks hold {blocks}")
        b = ready[rng.integers(len(ready))]
        if b[1] is None:  # thread 0's atomicAdd for the next ticket, in flight during the item
            b[1] = take()
            continue
        work = multi_block_l2_item(b[0], items, lag)
        if work:
            done.append(work)
            if work[0] == "read":
                read_done.add(work[1])
        b[0], b[1] = b[1], None
    return done, counter


def multi_block_smem_schedule(rows, chunks, slots, lag, grid, rng, split=False, held=None):
    """Runs multi_block_smem.cu's loop with `grid` blocks advancing in a random
    order, each a step of its loop at a time: fill the free slots (tickets in
    order; thread 0's ticket taken ahead as a write begins), reduce the next
    loaded chunk, or write the oldest once its row's chunks are all reduced
    (else reduce, else wait).  split: the MBS_SPLIT schedule, whose reducers and
    writers go their own ways: a step reduces the next loaded chunk or writes
    the oldest reduced one whose row is complete, whichever the draw picks of
    those possible (`lag` unused).  held (split only): a row's chunks that take
    tickets (MBS_COMPANIONS), chunk c + held reduced and written with chunk c.
    Returns the items (row * chunks + c) in the order written; raises
    RuntimeError if every unfinished block waits (a deadlock)."""
    held = chunks if held is None else held
    assert split or held == chunks, "companions: the split schedule's"
    items, counter = rows * held, 0
    lag = max(lag, 1)

    def covered(t):  # the items ticket t stands for: its chunk and its companion
        row, c = divmod(t, held)
        return [row * chunks + c] + ([row * chunks + c + held] if c + held < chunks else [])

    def take():
        nonlocal counter
        counter += 1
        return counter - 1

    blocks = [{"q": 0, "p": 0, "w": 0, "left": True, "next": None, "held": [None] * slots} for _ in range(grid)]
    reduced, written = set(), []

    def step(b):  # True: progressed; False: waits; None: finished
        if b["left"] and b["q"] < b["w"] + slots:
            taken = b["q"]
            while taken < b["w"] + slots:
                t = take() if b["next"] is None else b["next"]
                b["next"] = None
                if t >= items:
                    break
                b["held"][taken % slots] = t
                taken += 1
            b["left"], b["q"] = taken == b["w"] + slots, taken
            return True
        def oldest_complete():
            if b["w"] == b["p"]:
                return False
            row = b["held"][b["w"] % slots] // held
            return all(row * chunks + c in reduced for c in range(chunks))

        def write():
            if b["left"] and b["next"] is None:
                b["next"] = take()
            written.extend(covered(b["held"][b["w"] % slots]))
            b["w"] += 1
            return True

        def reduce_next():
            reduced.update(covered(b["held"][b["p"] % slots]))
            b["p"] += 1
            return True

        if split:
            steps = [f for f, possible in ((reduce_next, b["p"] < b["q"]), (write, oldest_complete())) if possible]
            if steps:
                return steps[rng.integers(len(steps))]()
            return None if b["w"] == b["q"] else False
        reduce = b["p"] < b["q"] and b["p"] - b["w"] < lag
        if not reduce and b["w"] < b["p"]:
            if oldest_complete():
                return write()
            reduce = b["p"] < b["q"]
            if not reduce:
                return False
        if reduce:
            return reduce_next()
        return None

    live = set(range(grid))
    waiting = set()
    while live:
        i = sorted(live)[rng.integers(len(live))]
        moved = step(blocks[i])
        if moved is None:
            live.discard(i)
            waiting.discard(i)
        elif moved:
            waiting.clear()
        else:
            waiting.add(i)
            if waiting == live:
                raise RuntimeError(f"deadlock: every block waits, holding {[b['held'] for b in blocks]}")
    return written


def _in_place_only(op):
    if op != "softmax":
        raise ValueError(f"the in-place emulation is of softmax (float32, or halves built wide); got {op}")


def line_slices(vecs, cluster, line_shift, capacity):
    """cluster_row's slices on 128-byte lines: (per_block, shift), block b holding the body's
    vectors [b per_block - shift, (b + 1) per_block - shift) clipped to it; per_block a whole
    number of 8-vector (128-byte) lines past the body's line_shift where `capacity` vectors a
    block hold that, else the even split (shift 0)."""
    per_block = -(-(vecs + line_shift) // cluster)
    lined = -(-per_block // 8) * 8
    return (lined, line_shift) if lined <= capacity else (-(-vecs // cluster), 0)


def slice_bounds(rank, per_block, shift, vecs):
    """Block `rank`'s vectors [v0, v1) of a body of `vecs`: [rank per_block - shift,
    (rank + 1) per_block - shift) clipped to the body (v1 >= v0; the kernels' v0, v1)."""
    v0 = min(max(rank * per_block - shift, 0), vecs)
    return v0, max(v0, min((rank + 1) * per_block - shift, vecs))


def cluster_slices(body, scalars, threads, cluster, per_block, exp=exp_approx, shift=0):
    """single_read's and cluster_row's blocks (call under np.errstate): block b
    holds the body's vectors [b per_block - shift, (b + 1) per_block - shift),
    clipped to the body, thread t of block 0 also scalar t; each thread's max m,
    e = exp(x - m) of its vectors and scalar, the block's merged (max, sum).
    Returns [(m, e, e_sc)] by block and the cluster's merged (M, S)."""
    blocks, pairs = [], []
    for rank in range(cluster):
        v0, v1 = slice_bounds(rank, per_block, shift, len(body))
        v = thread_vectors(body[v0:v1], threads)  # (iter, thread, vec)
        sc = np.full(threads, NEG_INF, dtype=F32)
        if rank == 0:
            sc[: len(scalars)] = scalars
        m = np.fmax(np.fmax.reduce(v, axis=(0, 2)), sc).astype(F32)
        base = exp_base(m)
        e = exp(v - base[None, :, None])
        e_sc = exp(sc - base)
        pairs.append(block_merge(m, (e.sum(axis=(0, 2), dtype=F32) + e_sc).astype(F32)))
        blocks.append((m, e, e_sc))
    return blocks, merge_all(pairs)


def put_scalars(out, y_sc, head, n_scalars):
    """Thread t's scalar output y_sc[t] into the row: the head first, then the tail."""
    out[:head] = y_sc[:head]
    out[len(out) - (n_scalars - head) :] = y_sc[head:n_scalars]


def single_read(row, misalign=0, threads=32, cluster=4, vec=4, op="softmax", slices=None, exp_shift=None,
                split_scale=None):
    """single_read.cu with e in place (SR_IN_PLACE: float32 softmax, or half
    softmax built wide, vec=8, through run()): slices per block, per-thread max
    then e, block and cluster merges, y = e * e^(m_t - M) / S.  slices:
    (per_block, shift) as cluster_slices takes them: a memory-merged group's
    fixed slice (SR_MEMORY_MERGE, `cluster` blocks of per_block vectors each,
    shift 0) or cluster_row's line_slices, where a cluster splits the row's
    body evenly.
    exp_shift: e by exp_elem with that shift (cluster_row's float32), else by
    exp_approx; split_scale (InPlaceScale, by default past a shift of 8): y =
    e * e^(m_t - M) * (1 / S), two roundings, not e * (e^(m_t - M) / S)."""
    _in_place_only(op)
    body, scalars = split(row, misalign, vec)
    per_block, shift = slices or (-(-len(body) // cluster), 0)
    head, _ = row_span(len(row), misalign, vec)
    out = np.full_like(row, np.nan)  # poisoned: an element no block writes stays NaN
    exp = exp_approx if exp_shift is None else exp_elem_of_difference(exp_shift)
    split_scale = (exp_shift or 0) > 8 if split_scale is None else split_scale
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        blocks, (total_m, total_s) = cluster_slices(body, scalars, threads, cluster, per_block, exp, shift)
        for rank, (m, e, e_sc) in enumerate(blocks):
            rescale, inv = exp_approx(m - total_m), F32(1) / total_s
            if split_scale:
                e, e_sc = (e * rescale[None, :, None]).astype(F32), (e_sc * rescale).astype(F32)
                scale = np.full_like(rescale, inv)
            else:
                scale = (rescale * inv).astype(F32)
            y = (e * scale[None, :, None]).reshape(-1, vec)
            v0, v1 = slice_bounds(rank, per_block, shift, len(body))
            out[head + vec * v0 : head + vec * v1] = y[: v1 - v0].reshape(-1)
            if rank == 0:
                put_scalars(out, e_sc * scale, head, len(scalars))
    return out


def cluster_row(row, misalign=0, threads=32, cluster=4, vec=4, op="softmax", exp_shift=None, line_shift=0,
                capacity=None, **in_place):
    """cluster_row.cu: single_read's slices and merges, one row per cluster,
    the slices on 128-byte lines past the body's `line_shift` where blocks of
    `capacity` vectors hold them (line_slices; capacity None: no bound).
    float32 softmax keeps e in place (CR_IN_PLACE), as single_read, by
    exp_elem with `exp_shift` (FLOAT_EXP_FTZ; by default float32's); half softmax (CR_HALF_SOFTMAX)
    takes exp_elem with `exp_shift` twice (cluster_row_half_softmax);
    log_softmax takes each thread's max then sum (held_max_sum; halves' terms
    by exp_elem, shift 0), block 0 adds the scalars, and writes the output
    from x."""
    body, scalars = split(row, misalign, vec)
    slices = line_slices(len(body), cluster, line_shift, len(body) if capacity is None else capacity)
    if op == "softmax" and vec == 4:
        shift = EXP_SHIFT["float32"] if exp_shift is None else exp_shift
        return single_read(row, misalign, threads, cluster, vec, op, exp_shift=shift, slices=slices, **in_place)
    if op == "softmax":
        return cluster_row_half_softmax(row, misalign, threads, cluster, exp_shift or 0.0, slices)
    per_block, shift = slices
    exp = exp_elem_of_difference() if vec == 8 else exp_approx
    bounds = [slice_bounds(rank, per_block, shift, len(body)) for rank in range(cluster)]
    blocks = [block_merge(*max_then_sum_threads(body[v0:v1], scalars if rank == 0 else scalars[:0], threads, exp))
              for rank, (v0, v1) in enumerate(bounds)]
    m, s = merge_all(blocks)
    return write(row, m, s, op)


def cluster_row_half_softmax(row, misalign, threads, cluster, shift, slices=None):
    """CR_HALF_SOFTMAX: each thread's max (its vectors and, in block 0, its one
    scalar), its sum of exp_elem (2^shift e^(x - m_t)), the block and cluster
    merges; the body written as exp_elem(x, M) / S, the scalars as
    e * e^(m_t - M) / S.  slices: (per_block, shift) of cluster_slices, else even."""
    body, scalars = split(row, misalign, 8)
    head, _ = row_span(len(row), misalign, 8)
    per_block, line = slices or (-(-len(body) // cluster), 0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        blocks, (total_m, total_s) = cluster_slices(body, scalars, threads, cluster, per_block,
                                                    exp_elem_of_difference(shift), line)
        out = (exp_elem(row, total_m, shift) * (F32(1) / total_s)).astype(F32)
        m0, _, e0 = blocks[0]
        put_scalars(out, (e0 * (exp_approx(m0 - total_m) * (F32(1) / total_s))).astype(F32), head, len(scalars))
    return out


def lane_spread_row(n, seed=0):
    """Test data for the in-place e: a float32 row whose 16-byte vector v lies in
    (-90 (v % 32) / 31 - 1, -90 (v % 32) / 31], so the threads of a block (vectors t,
    t + threads, ...) have their maxima spread over [-90, 0]; every 16th element is
    -95, far below its thread's max where that is near 0."""
    rng = np.random.default_rng(seed)
    row = (-90.0 * ((np.arange(n) // 4) % 32) / 31 - rng.random(n)).astype(np.float32)
    row[::16] = -95
    return row


def close_by_elements(out, ref):
    """Every output within 1e-5 of its float64 reference, or 2 subnormal steps (2^-148)."""
    return bool(np.all(np.abs(out.astype(np.float64) - ref) <= 1e-5 * np.abs(ref) + 2.0**-148))


def single_read_warp(row, misalign=0, vec=4, op="softmax", exp_shift=None):
    """single_read_warp: max, e = e^(x - base) in place (exp_approx; halves,
    through run(): exp_elem with `exp_shift`), y = e * e^(base - m) / sum."""
    _in_place_only(op)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        m = np.fmax.reduce(row) if len(row) else NEG_INF
        base = exp_base(m)
        e = exp_approx(row - base) if exp_shift is None else exp_elem(row, base, exp_shift)
        return (e * (exp_approx(base - m) / e.sum(dtype=F32))).astype(F32)


# ------------------------------------------------------------ dtypes
VEC = {"float32": 4, "float16": 8, "bfloat16": 8}  # elements per 16-byte vector


def to_bits(x32, dtype):
    """float32 values rounded once to `dtype` (round to nearest even, as cvt.rn):
    float32 itself, float16 values, or bfloat16 bit patterns (uint16)."""
    x32 = np.asarray(x32, dtype=F32)
    if dtype == "float32":
        return x32
    if dtype == "float16":
        with np.errstate(over="ignore"):
            return x32.astype(np.float16)
    bits = x32.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x32), np.uint16(0x7FC0), rounded).astype(np.uint16)


def widen(stored, dtype):
    """Stored elements as float32, exactly (cvt.f32.f16, or a 16-bit shift for bfloat16)."""
    if dtype == "bfloat16":
        return (np.asarray(stored, dtype=np.uint16).astype(np.uint32) << 16).view(F32)
    return np.asarray(stored).astype(F32)


def run(name, stored, dtype="float32", op="softmax", misalign=0, **knobs):
    """Algorithm `name` (three_pass, two_pass, multi_block; single_read and
    single_read_warp as built wide for half softmax) on a row stored as `dtype`:
    widen, the float32 algorithm with `dtype`'s vector width, one rounding.
    The kernels that take exp_elem get its shift for `dtype` (single_read's
    and its warps' for halves only)."""
    if name in ("cluster_row", "multi_block_l2", "multi_block_smem") or (name.startswith("single_read") and dtype != "float32"):
        knobs = {"exp_shift": EXP_SHIFT.get(dtype, 0.0)} | knobs
    out32 = ALGORITHMS[name](widen(stored, dtype), misalign, vec=VEC[dtype], op=op, **knobs)
    return to_bits(out32, dtype)


# ------------------------------------------------------------ backward
def dot_terms(y, dy, op):
    """elements.cuh dot_term: dy * y (softmax) or dy (log_softmax), in float32."""
    with np.errstate(invalid="ignore", over="ignore"):
        return dy if op.startswith("log_softmax") else (dy * y).astype(F32)


def thread_dots(y_body, dy_body, y_scalars, dy_scalars, threads, op):
    """dot_span(): thread t adds up vec_dot of its vectors t, t + threads, ...
    (pairwise within a vector), then its scalars; returns the threads' sums."""
    acc = np.zeros(threads, dtype=F32)
    terms = dot_terms(y_body, dy_body, op)
    iters = max(1, -(-len(terms) // threads))
    padded = np.zeros((iters * threads, y_body.shape[1]), dtype=F32)  # a thread past the end adds nothing
    padded[: len(terms)] = terms
    with np.errstate(invalid="ignore", over="ignore"):
        for v in padded.reshape(iters, threads, -1):
            w = v.shape[1]
            while w > 1:  # ((t0 + t1) + (t2 + t3)) + ...
                v = (v[:, 0::2] + v[:, 1::2]).astype(F32)
                w //= 2
            acc = (acc + v[:, 0]).astype(F32)
        sc = dot_terms(y_scalars, dy_scalars, op)
        for k, t in enumerate(sc):
            acc[k % threads] = F32(acc[k % threads] + t)
    return acc


def grad_out(y, dy, dot, op):
    """elements.cuh grad_out in float32: y * (dy - dot); or dy - expf(y) * dot as one fma."""
    with np.errstate(invalid="ignore", over="ignore"):
        if op.startswith("log_softmax"):
            e = np.exp(np.asarray(y, F32)).astype(np.float64)
            return (dy.astype(np.float64) - e * np.float64(dot)).astype(F32)
        return (y * (dy - F32(dot)).astype(F32)).astype(F32)


def _chunk_dot(y, dy, misalign, threads, vec, op, v0, v1, with_scalars):
    yb, ys = split(y, misalign, vec)
    gb, gs = split(dy, misalign, vec)
    if not with_scalars:
        ys, gs = ys[:0], gs[:0]
    with np.errstate(invalid="ignore", over="ignore"):
        return thread_dots(yb[v0:v1], gb[v0:v1], ys, gs, threads, op).sum(dtype=F32)  # block_sum


def two_pass_backward(y, dy, misalign=0, threads=64, vec=4, op="softmax_backward"):
    """two_pass.cu with SOFTMAX_BACKWARD: the block's dot, then dx element by element."""
    dot = _chunk_dot(y, dy, misalign, threads, vec, op, 0, None, True)
    return grad_out(y, dy, dot, op)


def multi_block_backward(y, dy, misalign=0, threads=64, chunk_vecs=8, vec=4, op="softmax_backward"):
    """multi_block.cu with SOFTMAX_BACKWARD: per-chunk dots (the scalars in chunk 0),
    their sum in chunk order, then dx."""
    vecs = row_span(len(y), misalign, vec)[1]
    chunks = max(1, -(-vecs // chunk_vecs))
    parts = [_chunk_dot(y, dy, misalign, threads, vec, op, c * chunk_vecs, (c + 1) * chunk_vecs, c == 0)
             for c in range(chunks)]
    with np.errstate(invalid="ignore", over="ignore"):
        dot = np.array(parts, dtype=F32).sum(dtype=F32)
    return grad_out(y, dy, dot, op)


def multi_block_l2_backward(y, dy, misalign=0, threads=32, vpt=2, vec=4, op="softmax_backward"):
    """multi_block_l2.cu with SOFTMAX_BACKWARD: per-chunk dots of threads x vpt
    vectors, thread t adds slots t, t + threads, ... (row_total), then the block."""
    vecs = row_span(len(y), misalign, vec)[1]
    chunk_vecs = threads * vpt
    chunks = max(1, -(-vecs // chunk_vecs))
    parts = [_chunk_dot(y, dy, misalign, threads, vec, op, c * chunk_vecs, (c + 1) * chunk_vecs, c == 0)
             for c in range(chunks)]
    with np.errstate(invalid="ignore", over="ignore"):
        per_thread = [np.array(parts[t::threads], dtype=F32).sum(dtype=F32) for t in range(threads)]
        dot = np.array(per_thread, dtype=F32).sum(dtype=F32)
    return grad_out(y, dy, dot, op)


def cluster_row_backward(y, dy, misalign=0, threads=32, cluster=4, vec=4, op="softmax_backward", line_shift=0,
                         capacity=None):
    """cluster_row.cu with SOFTMAX_BACKWARD: each block's dot over its slice (block 0
    with the scalars; the slices of cluster_row's line_slices), the cluster's dots summed, then dx."""
    vecs = row_span(len(y), misalign, vec)[1]
    per_block, shift = line_slices(vecs, cluster, line_shift, vecs if capacity is None else capacity)
    parts = [_chunk_dot(y, dy, misalign, threads, vec, op, *slice_bounds(r, per_block, shift, vecs), r == 0)
             for r in range(cluster)]
    with np.errstate(invalid="ignore", over="ignore"):
        dot = np.array(parts, dtype=F32).sum(dtype=F32)
    return grad_out(y, dy, dot, op)


BACKWARD_ALGORITHMS = {"two_pass": two_pass_backward, "multi_block": multi_block_backward,
                       "multi_block_l2": multi_block_l2_backward, "cluster_row": cluster_row_backward}


def run_backward(name, y_stored, dy_stored, dtype="float32", op="softmax_backward", misalign=0, **knobs):
    """A backward algorithm on rows stored as `dtype`: widen y and dy, float32 math, one rounding."""
    y, dy = widen(y_stored, dtype), widen(dy_stored, dtype)
    return to_bits(BACKWARD_ALGORITHMS[name](y, dy, misalign, vec=VEC[dtype], op=op, **knobs), dtype)


ALGORITHMS = {
    "three_pass": three_pass,
    "two_pass": two_pass,
    "multi_block": multi_block,
    "multi_block_l2": multi_block_l2,
    "multi_block_smem": multi_block_smem,
    "single_read": single_read,
    "single_read_warp": single_read_warp,
    "cluster_row": cluster_row,
}


def store_shifted(out, writes, j, val, nxt, next_valid, first, d):
    """common.cuh store_shifted: body vector j into `out` (the body, y + head)
    at shift d; `writes` counts every float written and records vector stores."""
    p = 4 * j
    if first:
        for c in range(4 - d):
            out[p + c] = val[c]
            writes["floats"][p + c] += 1
    if next_valid:
        aligned = np.concatenate([val[4 - d:], nxt[: 4 - d]])
        out[p + 4 - d : p + 8 - d] = aligned
        writes["floats"][p + 4 - d : p + 8 - d] += 1
        writes["vectors"].append(p + 4 - d)
    else:
        for c in range(4 - d, 4):
            out[p + c] = val[c]
            writes["floats"][p + c] += 1


def shfl(provided, src):
    """__shfl_sync over a warp: lane l gets the value lane src[l] *provides*
    (what each lane passes in, not what the reader would like)."""
    return provided[np.asarray(src)]


def shfl_down(provided, delta=1):
    """__shfl_down_sync: lane l gets lane l + delta's value; lanes past the end keep their own."""
    lanes = np.arange(32)
    return shfl(provided, np.where(lanes + delta < 32, lanes + delta, lanes))


def realigned_block_stores(body, v0, vecs, threads, vpt, d):
    """single_read.cu's realigned store of one block's slice (vectors [v0, v0 +
    vecs) of `body`, held by thread t as vectors t + k * threads): lane l + 1's
    vector by shuffle, a warp's last lane takes the next warp's first vector
    from `firsts`, the block's last warp thread 0's vector of the next k."""
    warps = threads // 32
    n = 4 * len(body) + 8
    out = np.full(n, np.nan, dtype=F32)
    writes = {"floats": np.zeros(n, dtype=int), "vectors": []}
    held = np.zeros((vpt, threads, 4), dtype=F32)
    for k in range(vpt):
        for t in range(threads):
            if t + k * threads < vecs:
                held[k, t] = body[v0 + t + k * threads]
    firsts = held[:, ::32]  # [k][warp], written by each warp's lane 0
    for k in range(vpt):
        for warp in range(warps):
            nxt = shfl_down(held[k, 32 * warp : 32 * warp + 32])
            nxt[31] = firsts[k, warp + 1] if warp + 1 < warps else (firsts[k + 1, 0] if k + 1 < vpt else nxt[31])
            for lane in range(32):
                t = 32 * warp + lane
                j = t + k * threads
                if j < vecs:
                    store_shifted(out, writes, v0 + j, held[k, t], nxt[lane], j + 1 < vecs, j == 0, d)
    return out, writes


def realigned_warp_stores(body, vpt, d):
    """single_read_warp's store (store4_warp): each warp's 32 vectors (lane l
    holds vector l + 32 k) are one run, vector j + 1 by a shuffle down."""
    n = 4 * len(body) + 8
    out = np.full(n, np.nan, dtype=F32)
    writes = {"floats": np.zeros(n, dtype=int), "vectors": []}
    lanes = np.arange(32)
    for k in range(vpt):
        j = lanes + 32 * k
        valid = j < len(body)
        held = np.where(valid[:, None], body[np.minimum(j, len(body) - 1)], 0).astype(F32)
        nxt = shfl_down(held)
        next_valid = shfl_down(valid) & (lanes < 31)
        for lane in range(32):
            if valid[lane]:
                store_shifted(out, writes, j[lane], held[lane], nxt[lane], next_valid[lane], lane == 0, d)
    return out, writes


