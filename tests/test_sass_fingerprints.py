"""The float32 softmax builds keep their machine code: a fingerprint (SHA-256
of every .text section of the cubin) of each default build, recorded from
main before float16/bfloat16/log_softmax were added to the same sources
(issue 8, part 1: the SASS was compared with cuobjdump and found identical).
A change to the float32 code, in a kernel or in common.cuh, fails here; if it
is meant, rerecord (`python tests/test_sass_fingerprints.py`) and say why in
the commit.  The fingerprints depend on the NVRTC version: with another one
the test skips."""

import hashlib
import json
import struct
import sys
from pathlib import Path

import pytest

from softmax_lab import loader
from softmax_lab.variants.warp_rows import WIDE_VPT as WARP_ROW_WIDE_VPT

RECORD = Path(__file__).with_name("fp32_sass_fingerprints.json")
FINGERPRINT_BUILDS = {
    f"{source}-{arch}": (source, arch, None)
    for source in ("three_pass.cu", "two_pass.cu", "multi_block.cu", "copy.cu") for arch in ("sm_80", "sm_90")
}
FINGERPRINT_BUILDS["single_read_warp-sm_90"] = ("single_read.cu", "sm_90", {"SR_WARP_VPT": WARP_ROW_WIDE_VPT})
FINGERPRINT_BUILDS["single_read-8x512x24x1x1-sm_90"] = (
    "single_read.cu", "sm_90", {"SR_CLUSTER": 8, "SR_THREADS": 512, "SR_VPT": 24, "SR_STAGES": 1, "SR_BLOCKS_PER_SM": 1,
                                "SR_PUSHED_MERGE": 1})  # the headline's plan (pushed merge since the 28th session)


def text_fingerprint(cubin: bytes) -> str:
    """SHA-256 over the names and bytes of the ELF's .text.* sections (the machine code)."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)

    def section(i):
        name, _type, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize)
        return name, offset, size

    _, str_off, _ = section(shstrndx)
    h = hashlib.sha256()
    for i in range(shnum):
        name_at, offset, size = section(i)
        name = cubin[str_off + name_at : cubin.index(b"\0", str_off + name_at)]
        if name.startswith(b".text."):
            h.update(name + b"\0" + cubin[offset : offset + size])
    return h.hexdigest()


def _nvrtc_version() -> str:
    from cupy.cuda import nvrtc

    return ".".join(map(str, nvrtc.getVersion()))


def _record() -> dict:
    return {"nvrtc": _nvrtc_version(),
            "builds": {label: text_fingerprint(loader.nvrtc_cubin(*build)[0]) for label, build in FINGERPRINT_BUILDS.items()}}


@pytest.mark.parametrize("label", list(FINGERPRINT_BUILDS))
def test_float32_softmax_machine_code_is_unchanged(label):
    record = json.loads(RECORD.read_text())
    if record["nvrtc"] != _nvrtc_version():
        pytest.skip(f"fingerprints recorded with NVRTC {record['nvrtc']}; this is {_nvrtc_version()}")
    cubin, _ = loader.nvrtc_cubin(*FINGERPRINT_BUILDS[label])
    assert text_fingerprint(cubin) == record["builds"][label], label


def test_fingerprint_sees_a_change():
    a = text_fingerprint(loader.nvrtc_cubin("two_pass.cu", "sm_90")[0])
    assert a == text_fingerprint(loader.nvrtc_cubin("two_pass.cu", "sm_90")[0])
    assert a != text_fingerprint(loader.nvrtc_cubin("two_pass.cu", "sm_90", {"SOFTMAX_LOG": 1})[0])


if __name__ == "__main__":
    RECORD.write_text(json.dumps(_record(), indent=1, sort_keys=True) + "\n")
    print(RECORD.read_text(), file=sys.stderr)
