"""Session 20 probe 54: log_softmax backward with y loaded straight from device memory (SRB_Y_DIRECT).
The halves' log_softmax backward runs 1.18 x the torch.add floor at 4096 x 151936, their softmax backward
1.06 on the same plan (4 x 608 x 8, y and dy staged: 152 KB a block, one stage).  log_softmax's dot is the
sum of dy alone, so the stages can hold dy alone and each thread load its vectors of y as dy leaves the
stage: half the shared memory, so two stages (the next row's dy in flight during the whole row) or two
blocks per SM.  Candidates (cluster x threads x vpt x stages x blocks per SM; b: y and dy, s: line shift):
"auto" as committed; "dN.P" the plan's block with SRB_Y_DIRECT, N stages, y loaded with policy P (0 plain,
1 evict-first, 2 evict-last); "eN.P" the same at other block shapes.  Times ÷ torch.add(y, dy, out=dx),
median of 9 (2nd-8th); every output checked against float64 first.  (The run had p40's timing harness
copied in; it is imported from p40 since, the same code.)
PYTHONPATH=. python3 notes/tune-runs/2026-12-02-log-backward-direct-y-p54.py
"""
import dataclasses
import runpy
from concurrent.futures import ThreadPoolExecutor
import torch, cupy as cp
from softmax_lab import loader
from softmax_lab.device import max_active_clusters

p40 = runpy.run_path("notes/tune-runs/2026-12-02-short-halves-p40.py", run_name="p40")  # its harness: tm, dev, ...
tm, V, dev, S, TD, L2 = (p40[k] for k in ("tm", "V", "dev", "S", "TD", "L2"))


def direct_defines(sh, q, policy):
    """(plan, build) of single_read_backward with SRB_Y_DIRECT at plan q (its stages hold dy alone)."""
    # line_shifted sizes y's stage too: take its answer for the slices alone (y and dy share a layout here)
    q = dataclasses.replace(q, line_shift=V.line_shifted(dataclasses.replace(q, arrays=1), sh, dev).line_shift)
    defs = q.defines(dev) | V.kernel_defines(sh.dtype, sh.op) | {"SRB_Y_DIRECT": 1, "SRB_Y_LOAD": policy}
    if q.stages > 1 or q.blocks_per_sm > 1:
        defs["SRB_SCALAR_AHEAD"] = 0  # ptxas spilled 8 bytes with it at 4 x 608 x 8 x 2 (these rows have no scalars)
    return q, defs


def direct(sh, q, policy):
    q, defs = direct_defines(sh, q, policy)
    smem = q.smem_bytes // 2
    k = loader.get_kernel("single_read_backward.cu", "single_read_backward", defs, device_id=dev.id)
    k.max_dynamic_shared_size_bytes = smem
    if q.cluster > 8:
        cp.cuda.driver.funcSetAttribute(k.kernel.ptr, V._NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
    if q.cluster == 1:
        groups = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(k.kernel.ptr, q.threads, smem) * dev.sm_count
    else:
        groups = max_active_clusters(k, q.cluster, q.threads, smem)
    groups = min(sh.rows, groups)
    return V._prepared_launcher(k.kernel, (groups * q.cluster, 1), (q.threads,), sh.scalars(), True, smem), \
        f"{q.label()} {groups} clusters"


def plan_of(name, plan):
    kind, rest = name[0], name[1:]
    if kind == "d":
        stages, policy = map(int, rest.split("."))
        return V.ClusterConfig(plan.cluster, plan.threads, plan.vpt, stages, plan.blocks_per_sm, arrays=2), policy
    cl, t, v, st, b, policy = map(int, rest.split("."))  # e<cluster>.<threads>.<vpt>.<stages>.<blocks>.<policy>
    return V.ClusterConfig(cl, t, v, st, b, arrays=2), policy


def prebuild(jobs):
    """Every build the jobs take, compiled in parallel first (NVRTC; cached for get_kernel)."""
    builds = []
    for r, c, d, cands in jobs:
        it = V.DTYPES[d]
        sh = V.Shape(r, c, c, c, 0, 0, it, d, "log_softmax_backward", c, 0)
        plan = V.single_read_config(c, dev, r, it, arrays=2)
        for name in cands:
            if name != "auto":
                builds.append(direct_defines(sh, *plan_of(name, plan))[1])
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda defs: loader.get_kernel("single_read_backward.cu", "single_read_backward", defs,
                                                     device_id=dev.id), builds))
    print(f"built {len(builds)}", flush=True)


def run(r, c, d, cands, op="log_softmax_backward"):
    torch.manual_seed(0)
    it = V.DTYPES[d]
    nsets = max(1, min(8, -(-4 * L2 // (3 * r * c * it))))
    fwd = torch.softmax if op == "softmax_backward" else torch.log_softmax
    ys = [fwd(torch.randn(r, c, device="cuda") * 3, -1).to(TD[d]) for _ in range(nsets)]
    gs = [torch.randn(r, c, device="cuda").to(TD[d]) for _ in range(nsets)]
    dxs = [torch.empty_like(ys[0]) for _ in range(nsets)]
    floor = tm(lambda i: torch.add(ys[i], gs[i], out=dxs[i]), nsets)[0]
    sh = V.Shape(r, c, c, c, 0, 0, it, d, op, c, 0)
    y64, g64 = ys[0].double(), gs[0].double()
    want = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True)) if op == "softmax_backward" else \
        g64 - y64.exp() * g64.sum(-1, keepdim=True)
    scale = (y64.abs() * 0 + g64.abs() + (y64.exp() * g64.abs().sum(-1, keepdim=True))).amax(-1, keepdim=True)
    plan = V.single_read_config(c, dev, r, it, arrays=2)
    res = []
    for name in cands:
        try:
            if name == "auto":
                launch, label = V.preferences(sh, dev)[0].prepare(sh, dev), f"auto {V.preferences(sh, dev)[0].name}"
            else:
                q, policy = plan_of(name, plan)
                if q.capacity_vecs < -(-c * it // 16):
                    res.append(f"{name} does not hold the row")
                    continue
                launch, label = direct(sh, q, policy)
                label = f"{name}:{label}"
            call = lambda i: launch(ys[i].data_ptr(), dxs[i].data_ptr(), S, gs[i].data_ptr())
            dxs[0].fill_(float("nan")); call(0); torch.cuda.synchronize()
            err = ((dxs[0].double() - want).abs() / scale).nan_to_num(1e9).max().item()
            t = tm(call, nsets)
            res.append(f"{label} {t[0] / floor:.3f} ({t[1] / floor:.3f}-{t[2] / floor:.3f})"
                       f"{'' if err < 2e-2 else f' BAD {err:.2g}'}")
        except Exception as e:  # noqa: BLE001 - a probe: report and go on
            res.append(f"{name} ERR {type(e).__name__}: {str(e)[:120]}")
    print(f"{r}x{c} {d} {op} (add {floor * 1e3:.0f} us, plan {plan.label()}): " + " | ".join(res), flush=True)
    del ys, gs, dxs
    torch.cuda.empty_cache()


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), flush=True)
    base = ("auto", "d1.1", "d2.1", "d2.0", "d2.2", "auto", "d2.1")
    jobs = [(4096, 151936, d, base + ("e8.320.8.2.2.1", "e8.320.8.1.2.1")) for d in ("bfloat16", "float16")]
    jobs += [(4096, 151936, "float32", base), (4096, 393216, "bfloat16", base), (4096, 393216, "float32", base),
             (4096, 128256, "bfloat16", base + ("e4.256.8.2.2.1",)), (4096, 100003, "bfloat16", base),
             (1056, 151936, "bfloat16", base), (132, 151936, "bfloat16", base),
             (4096, 32000, "bfloat16", ("auto", "d1.1", "d2.1"))]
    prebuild(jobs)
    for job in jobs:
        run(*job)
