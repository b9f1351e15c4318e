"""cluster_row's register model, checked without a GPU: every block shape and vector count
(BLOCK_SHAPES in softmax_lab/variants/cluster_row.py), for clusters of 1 and 16 blocks and every
dtype and op, compiled with NVRTC for sm_90 at the blocks per SM the model gives (blocks_per_sm); prints the builds where
ptxas spills (notes/TUNING.md#register-model says which do).  About 640 builds, 1.5 minutes on two cores:

    PYTHONPATH=. python benchmarks/cluster_row_registers.py
"""
from multiprocessing import Pool

from softmax_lab import loader
from softmax_lab.problem import ALL_OPS, BACKWARD_OPS, DTYPES, kernel_defines
from softmax_lab.variants import cluster_row as CR


def build(job):
    """(job, registers, spilled bytes) of one build at the model's blocks per SM."""
    dtype, op, cluster, threads, vpt = job
    arrays = 2 if op in BACKWARD_OPS else 1
    blocks = CR.blocks_per_sm(threads, vpt, arrays, DTYPES[dtype], cluster)
    defines = kernel_defines(dtype, op) | {"CR_CLUSTER": cluster, "CR_THREADS": threads, "CR_VPT": vpt,
                                             "CR_BLOCKS_PER_SM": blocks}
    (usage,) = loader.ptxas_usage("cluster_row.cu", "sm_90", defines).values()
    return job + (blocks,), usage.registers, usage.spilled_bytes


def main():
    jobs = sorted({(dtype, op, cluster, threads, vpt)
                   for dtype, itemsize in DTYPES.items() for op in ALL_OPS
                   for threads, most in CR.BLOCK_SHAPES[2 if op in BACKWARD_OPS else 1, itemsize]
                   for vpt in range(1, most + 1) for cluster in (1, 16)})
    with Pool(2) as pool:
        spills = [r for r in pool.imap_unordered(build, jobs) if r[2]]
    print(f"{len(jobs)} builds (dtype, op, cluster, threads, vpt, blocks per SM); {len(spills)} spill")
    for job, registers, spilled in sorted(spills):
        print(job, f"{registers} registers, {spilled} bytes spilled")


if __name__ == "__main__":
    main()
