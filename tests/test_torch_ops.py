"""softmax_lab.torch's registrations without a GPU: schemas, and the fake implementations'
shapes, dtypes, strides and errors (what torch.compile and torch.export trace with).
Skipped without torch; tests/test_torch_ops_gpu.py runs the ops."""

import pytest

torch = pytest.importorskip("torch")
import softmax_lab.torch  # noqa: F401  (registers the ops)
from torch._subclasses.fake_tensor import FakeTensorMode

OPS = torch.ops.softmax_lab


def test_schemas_say_what_is_written():
    assert str(OPS.softmax.default._schema) == "softmax_lab::softmax(Tensor x, SymInt dim) -> Tensor"
    assert "Tensor(a2!) out" in str(OPS.log_softmax_out.default._schema)
    assert str(OPS.softmax_backward.default._schema).startswith("softmax_lab::softmax_backward(Tensor dy, Tensor y")


@pytest.mark.parametrize("shape, dim, strides", [((3, 5, 7), 1, (35, 1, 5)), ((3, 5, 7), -1, (35, 7, 1)),
                                                 ((4,), 0, (1,))])
def test_fake_results_are_laid_out_as_the_library_lays_out_a_new_one(shape, dim, strides):
    """The rows contiguous, seen with the row axis moved back to dim."""
    with FakeTensorMode():
        x = torch.empty(shape, device="meta", dtype=torch.bfloat16)
        for y in (OPS.softmax(x, dim), OPS.log_softmax(x, dim), OPS.softmax_backward(x, x, dim)):
            assert (y.shape, y.stride(), y.dtype) == (x.shape, strides, x.dtype)


@pytest.mark.parametrize("make, error", [(lambda: torch.empty(3, 4, device="meta", dtype=torch.float64), TypeError),
                                         (lambda: torch.empty((), device="meta"), ValueError)])
def test_fake_implementations_refuse_what_the_library_refuses(make, error):
    with FakeTensorMode(), pytest.raises(error):
        OPS.softmax(make(), 0)
    with FakeTensorMode(), pytest.raises((ValueError, IndexError)):
        OPS.log_softmax(torch.empty(3, 4, device="meta"), 2)
