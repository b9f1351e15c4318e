"""The float64 references of the row statistics and of the cross-entropy loss with its
gradient (softmax_lab.reference): the gradient against central differences of the
loss, torch's meaning of each option, and the special rows."""

import numpy as np
import pytest

from softmax_lab.reference import cross_entropy_reference, log_softmax_reference, logsumexp_reference


def _inputs(rows=6, vocab=9, seed=0, ignore=(2,)):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, vocab)) * 3
    t = rng.integers(0, vocab, rows)
    t[list(ignore)] = -100
    return x, t


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing,z", [(0.0, 0.0), (0.1, 0.0), (0.0, 1e-2), (0.25, 3e-3)])
def test_the_gradient_is_the_loss_s_derivative(reduction, smoothing, z):
    x, t = _inputs()
    kw = {"reduction": reduction, "label_smoothing": smoothing, "z_loss": z}
    got = cross_entropy_reference(x, t, **kw)

    def total(v):
        return float(np.sum(cross_entropy_reference(v, t, **kw)["loss"]))  # "none": an incoming gradient of 1 a row

    h = 1e-6
    numeric = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        up, down = x.copy(), x.copy()
        up[i] += h
        down[i] -= h
        numeric[i] = (total(up) - total(down)) / (2 * h)
    assert np.allclose(got["grad"], numeric, atol=1e-7, rtol=1e-6)
    assert not got["grad"][2].any()  # the ignored row


def test_without_options_a_row_s_loss_is_minus_the_target_s_log_softmax():
    x, t = _inputs(ignore=())
    got = cross_entropy_reference(x, t, reduction="none")
    assert np.allclose(got["loss"], -log_softmax_reference(x)[np.arange(len(t)), t], rtol=1e-14)
    assert np.allclose(got["lse"], np.log(np.exp(x).sum(axis=1)), rtol=1e-14)
    mean = cross_entropy_reference(x, t)["loss"]
    assert mean == pytest.approx(got["loss"].mean(), rel=1e-14)


def test_smoothing_and_z_loss_add_their_terms():
    x, t = _inputs(ignore=())
    plain = cross_entropy_reference(x, t, reduction="none")
    lse = plain["lse"]
    smooth = cross_entropy_reference(x, t, reduction="none", label_smoothing=0.2)["loss"]
    assert np.allclose(smooth, 0.8 * plain["loss"] + 0.2 * (lse - x.mean(axis=1)), rtol=1e-13)
    z = cross_entropy_reference(x, t, reduction="none", z_loss=1e-3)["loss"]
    assert np.allclose(z, plain["loss"] + 1e-3 * lse**2, rtol=1e-13)


def test_the_mean_counts_only_rows_not_ignored_and_is_nan_when_all_are():
    x, t = _inputs(ignore=(0, 3))
    per_row = cross_entropy_reference(x, t, reduction="none")["loss"]
    assert per_row[0] == per_row[3] == 0.0
    assert cross_entropy_reference(x, t)["loss"] == pytest.approx(per_row.sum() / 4, rel=1e-14)
    assert cross_entropy_reference(x, t, reduction="sum")["loss"] == pytest.approx(per_row.sum(), rel=1e-14)
    every = np.full_like(t, -100)
    got = cross_entropy_reference(x, every)
    assert np.isnan(got["loss"]) and not got["grad"].any()
    assert cross_entropy_reference(x, every, reduction="sum")["loss"] == 0.0
    assert np.isfinite(got["lse"]).all()  # every row's lse, ignored or not


def test_a_target_outside_the_vocabulary_is_refused_unless_it_is_ignore_index():
    x, t = _inputs(ignore=())
    for bad in (-1, 9, 10**6):
        wrong = t.copy()
        wrong[1] = bad
        with pytest.raises(ValueError, match=r"outside \[0, 9\)"):
            cross_entropy_reference(x, wrong)
    wrong[1] = -1
    assert cross_entropy_reference(x, wrong, ignore_index=-1, reduction="none")["loss"][1] == 0.0
    with pytest.raises(ValueError, match="reduction"):
        cross_entropy_reference(x, t, reduction="avg")


def test_special_rows():
    x = np.array([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf], [0.0, np.inf, 1.0], [0.0, np.nan, 1.0]])
    lse, m = logsumexp_reference(x)
    assert lse[0] == pytest.approx(np.log(1 + np.e)) and m[0] == 1.0
    assert lse[1] == -np.inf and lse[2] == np.inf and np.isnan(lse[3])
    got = cross_entropy_reference(x[:1], np.array([1]), reduction="none")  # the target's logit is -inf
    assert got["loss"][0] == np.inf
    one = cross_entropy_reference(np.array([[2.5], [-1.0]]), np.array([0, 0]), reduction="none", label_smoothing=0.1)
    assert not one["loss"].any() and not one["grad"].any()  # a vocabulary of one: nothing to learn
